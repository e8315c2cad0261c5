"""What a judge keeps of one exercise between gradings."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.exercise import Exercise, load_module
from grader.judge.engine.grading_run import Trusted
from grader.judge.engine.reference_memo import RememberedReference
from grader.judge.engine.tiercode import TierCode
from grader.judge.registry import Tier, load_tiers
from grader.sandbox.remote import Forecasts


@dataclass
class ExerciseRuntime:
    """Its tiers, the compiled tier code, its trusted modules (loaded once: they never
    change while the judge lives), and the forecasts of its gradings' calls."""

    exercise: Exercise
    tiers: list[Tier]
    tier_code: TierCode
    trusted: Trusted
    forecasts: Forecasts = field(default_factory=Forecasts)

    @classmethod
    def load(cls, exercise: Exercise) -> ExerciseRuntime:
        """TierRegistryError when tiers.toml is broken."""
        tiers = load_tiers(exercise.tiers_file)
        trusted = Trusted(
            reference=RememberedReference(
                load_module(exercise.reference, f"{exercise.id}_reference"),
                exercise.function_names,
            ),
            experiment=load_module(exercise.experiment, f"{exercise.id}_experiment"),
        )
        return cls(exercise, tiers, TierCode(exercise.tiers_dir), trusted)
