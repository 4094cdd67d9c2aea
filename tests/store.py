"""The tests' store: every role's statements on one connection.

Why composed here and nowhere in the runtime: each caller of pgkick gets only its own
role's store (the producer's, the worker's, the maintenance one, the migrations'), but a
test seeds jobs as a producer, claims them as a worker, reaps them as the reaper and
migrates the schema, often on one connection. The methods are the runtime's own.
"""

from __future__ import annotations

from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.migrations import MigrationStore
from pgkick.store.producer import ProducerStore
from pgkick.store.worker import WorkerStore


class JobStore(ProducerStore, WorkerStore, MaintenanceStore, MigrationStore):
    """Every role's statements (a test plays every role)."""
