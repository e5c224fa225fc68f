"""Bad-input probes for jaxlab.experiments (the registry, verdict parts and by-name runners)."""

import dataclasses

from jaxlab import experiments as ex
from tests.bad_input import no_probes, probes, raises


@dataclasses.dataclass(frozen=True)
class _Config(ex.ExperimentConfig):
    n: int = 1

    @classmethod
    def smoke(cls):
        return cls()

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        return cls()


probes(
    "jaxlab.experiments.get",
    raises("name", lambda: ex.get(3), TypeError),
    raises("unknown experiment", lambda: ex.get("no-such-claim"), KeyError),
)
probes(
    "jaxlab.experiments.unknown_name_message",
    raises("name", lambda: ex.unknown_name_message(None), TypeError),
)
probes(
    "jaxlab.experiments.run_experiment",
    raises("seed", lambda: ex.run_experiment("mmfld", profile="smoke", seed=-1)),
    raises("seed", lambda: ex.run_experiment("mmfld", profile="smoke", seed=2**32)),
    raises("seed", lambda: ex.run_experiment("mmfld", profile="smoke", seed=1.5), TypeError),
    raises("profile", lambda: ex.run_experiment("mmfld", profile="huge"), ValueError),
    raises("name", lambda: ex.run_experiment(["mmfld"]), TypeError),
)
probes(
    "jaxlab.experiments.reproduce",
    raises("selected", lambda: ex.reproduce("mmfld"), TypeError),
    raises("seed", lambda: ex.reproduce(["mmfld"], seed=2**70)),
    raises("unknown experiment", lambda: ex.reproduce(["no-such-claim"]), KeyError),
)
probes(
    "jaxlab.experiments.check",
    raises("claim", lambda: ex.check(None, "1.2", True), TypeError),
    raises("measured", lambda: ex.check("ratio >= 1", 1.2, True), TypeError),
)
probes(
    "jaxlab.experiments.unresolved",
    raises("measured", lambda: ex.unresolved("bias ~ 1/N", None), TypeError),
)
probes(
    "jaxlab.experiments.Part",
    raises("status", lambda: ex.Part("a", "b", "maybe"), ValueError),
    raises("status", lambda: ex.Part("a", "b", True), ValueError),
)
probes(
    "jaxlab.experiments.verdict_status",
    raises("statuses", lambda: ex.verdict_status(["pass", "maybe"]), ValueError),
)
probes(
    "jaxlab.experiments.Result",
    raises("parts", lambda: ex.Result({}, [("a", "b", True)]), TypeError),
    raises("metrics", lambda: ex.Result([1.0], []), TypeError),
    raises("figures", lambda: ex.Result({}, [], figures=["fig"]), TypeError),
)
probes(
    "jaxlab.experiments.register",
    raises("name", lambda: ex.register("Bad_Name", config=_Config, claim="c"), ValueError),
    raises("config", lambda: ex.register("ok-name", config=dict, claim="c"), TypeError),
)
probes(
    "jaxlab.experiments.ExperimentConfig",
    raises("profile", lambda: _Config.for_profile("huge"), ValueError),
)
probes(
    "jaxlab.experiments.Experiment",
    raises("profile", lambda: ex.get("mmfld").make_config("medium"), ValueError),
)
no_probes("jaxlab.experiments.names", "takes no arguments")
no_probes(
    "jaxlab.experiments.NullProgress", "a reporter that accepts any iterable and reports nothing"
)
no_probes("jaxlab.experiments.Progress", "a typing Protocol, not called by users")
probes(
    "jaxlab.experiments.RunPart",
    raises("name", lambda: ex.RunPart("Seed 0", "c", {}, cpu_s=1, device_s=1, estimate="e")),
    raises("cpu_s", lambda: ex.RunPart("s", "c", {}, cpu_s=-1, device_s=1, estimate="e")),
    raises(
        "select", lambda: ex.RunPart("s", "c", [0], cpu_s=1, device_s=1, estimate="e"), TypeError
    ),
)
probes(
    "jaxlab.experiments.unit",
    raises("coords", lambda: ex.unit(3, lambda: 1), TypeError),
    raises("compute", lambda: ex.unit({"seed": 0}, 1), TypeError),
)
probes(
    "jaxlab.experiments.as_unit",
    raises("fn", lambda: ex.as_unit(None, lambda: {}), TypeError),
    raises("coords", lambda: ex.as_unit(print, {"seed": 0}), TypeError),
)
probes(
    "jaxlab.experiments.declare_parts",
    raises("no registered experiment", lambda: ex.declare_parts("no-such-claim", list), KeyError),
    raises("parts", lambda: ex.declare_parts("mmfld", None), TypeError),
)
probes(
    "jaxlab.experiments.parts",
    raises("unknown experiment", lambda: ex.parts("no-such-claim"), KeyError),
)
probes(
    "jaxlab.experiments.run_experiment",
    raises("part", lambda: ex.run_experiment("mmfld", profile="full", part="nope")),
    raises("full profile", lambda: ex.run_experiment("mmfld", profile="smoke", part="all")),
)
