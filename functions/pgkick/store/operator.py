"""The operator's store: the CLI's commands and the dashboard's actions.

Why a composition, not a role of its own: an operator enqueues and kicks (the
producer's statements) and reaps, reports, retries, cancels and purges (the
maintenance ones), on one connection; each statement stays bound in its role's module.
"""

from __future__ import annotations

from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.producer import ProducerStore


class OperatorStore(ProducerStore, MaintenanceStore):
    """The producer's and the maintenance statements on one connection."""
