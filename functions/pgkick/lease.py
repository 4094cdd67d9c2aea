"""Keeping leases alive while a worker holds jobs, and noticing when one is lost.

Why: a lease shorter than a long job would let the reaper hand the job to a
second worker while the first still runs it. The keeper extends every held
lease (one fenced statement for the whole batch) every third of the lease; an
extension that updates no row means the job was taken over, and the job's
`lease_lost` event tells its code to stop. The worker then writes nothing for it.
The same statement reports an operator's cancel request (`pgkick cancel`), which
sets the job's `cancelled` event: no round trip of its own.
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
        self._cancelled: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        self._ticking = threading.Lock()  # held while an extension of the batch is in flight
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, jobs: list[ClaimedJob]) -> None:
        with self._lock:
            for job in jobs:
                self._held[job.id] = job
                self._lost[job.id] = threading.Event()
                self._cancelled[job.id] = threading.Event()
        if self.interval is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pgkick-lease", daemon=True)
            self._thread.start()

    def release(self, job_id: int) -> None:
        """Stop extending a job whose outcome is recorded (or abandoned)."""
        with self._lock:
            self._held.pop(job_id, None)
            self._lost.pop(job_id, None)
            self._cancelled.pop(job_id, None)

    def forget(self, job_id: int) -> None:
        """Release a job and wait out an extension in flight that may still name it.

        Why: a snooze gives the attempt back, so the next claim hands out the same
        fencing token; an extension sent after the snooze would then touch the new
        owner's row. After this returns, this keeper never names the job again."""
        with self._ticking:
            self.release(job_id)

    def cancelled_event(self, job_id: int) -> threading.Event:
        with self._lock:
            return _flag(self._cancelled, job_id)

    def is_cancelled(self, job_id: int) -> bool:
        return self.cancelled_event(job_id).is_set()

    def lost_event(self, job_id: int) -> threading.Event:
        with self._lock:
            return _flag(self._lost, job_id)

    def is_lost(self, job_id: int) -> bool:
        return self.lost_event(job_id).is_set()

    def events(self, job_id: int) -> tuple[threading.Event, threading.Event]:
        """(lost, cancelled) of a job, as lost_event and cancelled_event give them, under one
        lock: what a task's context carries (one call a job, not two)."""
        with self._lock:
            return _flag(self._lost, job_id), _flag(self._cancelled, job_id)

    def extend(self, job: ClaimedJob) -> bool:
        """Extend one job's lease now (what a task calls); False marks it lost."""
        if self.is_lost(job.id):
            return False
        kept, cancel = self.store.extend_checked(job.id, job.attempts, self.lease)
        if not kept:
            self._mark_lost([job.id])
        elif cancel:
            self._mark_cancelled([job.id])
        return kept

    def tick(self) -> None:
        """Extend every held lease in one statement; mark the ones no longer ours, and the
        ones an operator asked to cancel."""
        with self._ticking:
            with self._lock:
                held = [job for job in self._held.values() if not self._lost[job.id].is_set()]
            if not held:
                return
            kept = self.store.extend_many(held, self.lease)
        self._mark_lost([job.id for job in held if job.id not in kept])
        self._mark_cancelled([job_id for job_id, cancel in kept.items() if cancel])

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

    def _mark_cancelled(self, ids: list[int]) -> None:
        with self._lock:  # only jobs still held: a released one has nobody to tell
            events = [(i, self._cancelled[i]) for i in ids if i in self._cancelled]
        for job_id, event in events:
            if not event.is_set():
                log.warning("job %s: cancel requested by an operator", job_id)
                event.set()

    def _run(self) -> None:
        assert self.interval is not None
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # the main loop meets the same fault on its next statement
                log.exception("lease extension failed")


def _flag(flags: dict[int, threading.Event], job_id: int) -> threading.Event:
    """The job's flag (the caller holds the keeper's lock); a job not held (any more)
    gets a fresh flag, never set by the keeper."""
    event = flags.get(job_id)
    if event is None:
        event = flags[job_id] = threading.Event()
    return event
