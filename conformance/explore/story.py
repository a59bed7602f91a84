"""A sequence of explorer actions told as a Gherkin-like scenario."""

from __future__ import annotations

from dataclasses import dataclass, field

DETAIL_LIMIT = 600


@dataclass
class Story:
    """The actions of one explored sequence, in business language, in order."""

    steps: list[str] = field(default_factory=list)

    def add(self, step: str) -> None:
        """Record one action (a When step, without its keyword)."""
        self.steps.append(step)

    def render(self, title: str, then: str, but: str, note: str = "") -> str:
        """The scenario: the actions as When/And steps, the invariant as Then, what the host
        did as But."""
        lines = [f"Scenario: {title}"]
        if note:
            lines.append(f"  # {note}")
        lines.append("  Given a freshly started host with an empty data directory")
        lines.append("  And two empty projects, A and B")
        for index, step in enumerate(self.steps):
            lines.append(f"  {'When' if index == 0 else 'And'} {step}")
        lines.append(f"  Then {then}")
        lines.append(f"  But {_one_line(but)}")
        return "\n".join(lines)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > DETAIL_LIMIT:
        flat = flat[: DETAIL_LIMIT - 1] + "…"
    return flat
