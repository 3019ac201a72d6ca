"""The launch section of a RunConfig: where and in how many processes a run trains."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from engine.config.schema import Section, advanced

MAX_GPU_INDEX = 1023  # far above any machine's GPU count; a bound for the form
# What the section's own check says, by name (the studio says it again in the visitor's language:
# studio.i18n.problems, keys ``check.<name>``).
LAUNCH_MESSAGES = {"devices_repeated": "name each GPU once"}


class LaunchSection(Section):
    """How the training process is started."""

    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where to train: auto picks a GPU when present.")
    num_processes: int = Field(
        1, ge=1, le=1024, description="Training processes (data parallel); more than one uses torchrun."
    )
    threads_per_process: int | None = Field(
        None,
        ge=1,
        le=1024,
        description=(
            "CPU threads per process (OMP_NUM_THREADS); empty: cores / processes, and a single process on a CPU "
            "leaves the cores that other programs keep busy."
        ),
        json_schema_extra=advanced(),
    )
    devices: list[Annotated[int, Field(ge=0, le=MAX_GPU_INDEX)]] | None = Field(
        None,
        max_length=MAX_GPU_INDEX + 1,
        description=(
            "GPUs the run may use, by index (e.g. 0, 1): it waits in the queue until they are free. Empty: any free "
            "GPU (one per process). A CPU machine always trains on the CPU."
        ),
    )

    @field_validator("devices")
    @classmethod
    def _distinct_devices(cls, value: list[int] | None) -> list[int] | None:
        """Each GPU once; an empty list (a cleared form box) means any free GPU."""
        if value and len(set(value)) != len(value):
            raise ValueError(LAUNCH_MESSAGES["devices_repeated"])
        return value or None
