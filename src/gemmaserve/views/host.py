"""Views of this host's results: ``env``."""

from __future__ import annotations

from gemmaserve.envinfo import EnvReport
from gemmaserve.views import summary, view
from gemmaserve.views.page import Page, page, table


@view(EnvReport)
def env_page(report: EnvReport) -> Page:
    return page(
        f"gemmaserve {report.gemmaserve}",
        f"python {report.python} ({report.executable})",
        f"platform {report.platform}",
        table(
            ["package", "version"],
            [(name, version or "not installed") for name, version in report.packages.items()],
        ),
    )


@summary(EnvReport)
def env_summary(report: EnvReport) -> str:
    """One line for an agent: versions, and what is missing (the structured content lists every package)."""
    missing = [name for name, version in report.packages.items() if version is None]
    text = f"gemmaserve {report.gemmaserve} on Python {report.python} ({report.platform})"
    return text + (f"; not installed: {', '.join(missing)}" if missing else "")
