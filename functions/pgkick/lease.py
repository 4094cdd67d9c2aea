"""Keeping leases alive while a worker holds jobs, and noticing when one is lost.

Why: a lease shorter than a long job would let the reaper hand the job to a
second worker while the first still runs it. The keeper extends every held
lease (one fenced statement for the whole batch) every third of the lease; an
extension that updates no row means the job was taken over, and the job's
`lease_lost` event tells its code to stop. The worker then writes nothing for it.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from pgkick.store import ClaimedJob, JobStore

log = logging.getLogger("pgkick.lease")


class LeaseKeeper:
    def __init__(self, store: JobStore, lease: timedelta, *, interval: float | None) -> None:
        """interval: seconds between automatic extensions; None leaves it to tick() (tests)."""
        self.store = store
        self.lease = lease
        self.interval = interval
        self._held: dict[int, ClaimedJob] = {}
        self._lost: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, jobs: list[ClaimedJob]) -> None:
        with self._lock:
            for job in jobs:
                self._held[job.id] = job
                self._lost[job.id] = threading.Event()
        if self.interval is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pgkick-lease", daemon=True)
            self._thread.start()

    def release(self, job_id: int) -> None:
        """Stop extending a job whose outcome is recorded (or abandoned)."""
        with self._lock:
            self._held.pop(job_id, None)
            self._lost.pop(job_id, None)

    def lost_event(self, job_id: int) -> threading.Event:
        with self._lock:
            event = self._lost.get(job_id)
            if event is None:  # not held (any more): a fresh flag, never set by us
                event = self._lost[job_id] = threading.Event()
            return event

    def is_lost(self, job_id: int) -> bool:
        return self.lost_event(job_id).is_set()

    def extend(self, job: ClaimedJob) -> bool:
        """Extend one job's lease now (what a task calls); False marks it lost."""
        if self.is_lost(job.id):
            return False
        kept = self.store.extend(job.id, job.attempts, self.lease)
        if not kept:
            self._mark_lost([job.id])
        return kept

    def tick(self) -> None:
        """Extend every held lease in one statement; mark the ones no longer ours."""
        with self._lock:
            held = [job for job in self._held.values() if not self._lost[job.id].is_set()]
        if not held:
            return
        kept = self.store.extend_many(held, self.lease)
        self._mark_lost([job.id for job in held if job.id not in kept])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _mark_lost(self, ids: list[int]) -> None:
        for job_id in ids:
            log.warning(
                "lease lost: job %s now belongs to another attempt",
                job_id,
                extra={"job_id": job_id},
            )
            self.lost_event(job_id).set()

    def _run(self) -> None:
        assert self.interval is not None
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # the main loop meets the same fault on its next statement
                log.exception("lease extension failed")
