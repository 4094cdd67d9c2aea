"""This repository's worker entry point (template.yaml: `Handler: worker.app.handler`).

The handler is pgkick's own, from the installed package; an app's template names
`pgkick.aws.worker.handler` directly.
"""

from pgkick.aws.worker import handler

__all__ = ["handler"]
