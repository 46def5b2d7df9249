"""Notebook 05b's goals, stated once (no torch: the findings read them too)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Goal:
    """A goal: at most `max_layers` transformer layers, at least `speedup` x all-MiniLM-L6-v2's titles/s on one
    thread, and for each (model, margin) of `margins` every paired AUC interval (each source and protocol) above
    -margin."""

    name: str
    max_layers: int
    speedup: float
    margins: tuple[tuple[str, float], ...]

    def text(self) -> str:
        layers = "static" if self.max_layers == 0 else f"<= {self.max_layers} layers"
        bars = ", ".join(f"{m} AUC interval above -{v:g}" for m, v in self.margins)
        return f"{self.name}: {layers}, >= {self.speedup:g}x titles/s on one thread, {bars}"


GOALS = (Goal("student", 3, 2.0, (("cosine", 0.01), ("gat_model", 0.02))), Goal("static", 0, 30.0, (("cosine", 0.03),)))
"""The study's goals: a small student and a static model that can replace all-MiniLM-L6-v2 on unseen titles."""


def goal_of(layers: int) -> Goal:
    return GOALS[1] if layers == 0 else GOALS[0]
