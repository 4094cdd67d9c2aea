"""This repository's reaper entry point (template.yaml: `Handler: reaper.app.handler`).

The handler is pgkick's own, from the installed package; an app's template names
`pgkick.aws.reaper.handler` directly.
"""

from pgkick.aws.reaper import handler

__all__ = ["handler"]
