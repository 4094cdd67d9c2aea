"""Keeping leases alive while a worker holds jobs, and noticing when one is lost.

Why: a lease shorter than a long job would let the reaper hand the job to a
second worker while the first still runs it. The keeper extends every held
lease (one fenced statement for the whole batch) every third of the lease; an
extension that updates no row means the job was taken over, and the job's
`lease_lost` event tells its code to stop. The worker then writes nothing for it.
The same statement reports an operator's cancel request (`pgkick cancel`), which
sets the job's `cancelled` event.

Why a check of its own between extensions: the lease is at least 300 s on Lambda
(the invocation's time and a margin), so an extension every third of it let a cancel
wait ~100 s to reach its task. Between two extensions the keeper reads the held jobs'
cancel marks every `cancel_interval` seconds (2 s in the worker): one read by primary
key (`job_cancel_requested_among`), no row written, so a cancel is seen within a few
seconds whatever the lease, and the table gets no more dead tuples than before. Like
the extensions it runs only while the worker holds jobs (invariant 5): with nothing
held the keeper sends nothing.

Why a lease is also marked lost when its extensions fail: a worker whose session died
(killed backend, network cut) cannot extend, so its leases run out and the reaper hands
the jobs to other workers, while its tasks run on. Each held job's lease end is kept on
the keeper's own clock (`monotonic`); an extension or cancel read that fails past it marks
the job lost, as an extension that updated no row does. Before it, the fault may heal.
(On Lambda a lease outlasts the invocation: this only bites a worker with a shorter one.)

Why the thread also watches the worker's announcement (`lapse`, pgkick.worker.lapse): it is
the only part of the worker awake while a long task runs, and it runs only while jobs are
held. It wakes at the lapse (not at its next beat) and sends nothing before it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick.worker.lapse import LapseKick

log = logging.getLogger("pgkick.lease")


class LeaseKeeper:
    """The held jobs, and which of them were lost or cancelled.

    Why sets, and events only on request: the worker asks "lost? cancelled?" of every
    job, and most jobs are neither, nor run code that waits on a flag. A job's two
    `threading.Event`s (what a task's context carries) are made when something asks
    for them, and set at once if the mark came first; holding and releasing a job is
    then a dict entry, not two condition variables (about a fifth of the worker's CPU
    per job went to them in the 8-worker drain)."""

    def __init__(
        self,
        store: WorkerStore,
        lease: timedelta,
        *,
        interval: float | None,
        cancel_interval: float | None = None,
    ) -> None:
        """interval: seconds between automatic extensions; None leaves it to tick() (tests).
        cancel_interval: seconds between reads of cancel marks in between (None: none)."""
        self.store = store
        self.lease = lease
        self.interval = interval
        self.cancel_interval = cancel_interval
        self._held: dict[int, ClaimedJob] = {}
        self._lost: set[int] = set()  # held jobs marked lost (their attempt taken over)
        self._cancelled: set[int] = set()  # held jobs an operator asked to cancel
        self._events: dict[int, tuple[threading.Event, threading.Event]] = {}  # (lost, cancelled)
        self._lock = threading.Lock()
        self._ticking = threading.Lock()  # held while an extension of the batch is in flight
        self._ends: dict[int, float] = {}  # held job: its lease's end, on `monotonic`
        self.monotonic: Callable[[], float] = time.monotonic  # tests pass their own
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # the drain's announcement, acted on at its lapse while jobs are held (None: not)
        self.lapse: LapseKick | None = None

    def hold(self, jobs: list[ClaimedJob]) -> None:
        ends = self.monotonic() + self.lease.total_seconds()  # (claimed just before)
        with self._lock:
            for job in jobs:
                self._held[job.id] = job
                self._ends[job.id] = ends
            if self._lost or self._cancelled or self._events:  # a job held again starts clean
                for job in jobs:
                    self._forget_marks(job.id)
        if self.interval is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pgkick-lease", daemon=True)
            self._thread.start()

    def release(self, job_id: int) -> None:
        """Stop extending a job whose outcome is recorded (or abandoned)."""
        with self._lock:
            self._held.pop(job_id, None)
            self._ends.pop(job_id, None)
            self._forget_marks(job_id)

    def release_many(self, job_ids: list[int]) -> None:
        """release() for a batch, under one acquisition of the lock."""
        with self._lock:
            for job_id in job_ids:
                self._held.pop(job_id, None)
                self._ends.pop(job_id, None)
            if self._lost or self._cancelled or self._events:
                for job_id in job_ids:
                    self._forget_marks(job_id)

    def forget(self, job_id: int) -> None:
        """Release a job and wait out an extension in flight that may still name it.

        Why: a snooze gives the attempt back, so the next claim hands out the same
        fencing token; an extension sent after the snooze would then touch the new
        owner's row. After this returns, this keeper never names the job again."""
        with self._ticking:
            self.release(job_id)

    def cancelled_event(self, job_id: int) -> threading.Event:
        return self.events(job_id)[1]

    def is_cancelled(self, job_id: int) -> bool:
        return job_id in self._cancelled  # a set lookup is atomic: no lock needed to read

    def lost_event(self, job_id: int) -> threading.Event:
        return self.events(job_id)[0]

    def is_lost(self, job_id: int) -> bool:
        return job_id in self._lost

    def events(self, job_id: int) -> tuple[threading.Event, threading.Event]:
        """(lost, cancelled) of a job, made on first request (set already if the job is
        marked) and the same objects after: what a task's context carries. A job not held
        (any more) gets fresh flags, never set by the keeper unless it marks that job."""
        with self._lock:
            pair = self._events.get(job_id)
            if pair is None:
                pair = self._events[job_id] = (threading.Event(), threading.Event())
                if job_id in self._lost:
                    pair[0].set()
                if job_id in self._cancelled:
                    pair[1].set()
            return pair

    def extend(self, job: ClaimedJob) -> bool:
        """Extend one job's lease now (what a task calls); False marks it lost."""
        if self.is_lost(job.id):
            return False
        sent = self.monotonic()
        try:
            kept, cancel = self.store.extend_checked(job.id, job.attempts, self.lease)
        except Exception:
            self._lapsed([job])
            raise
        self._extended([job.id] if kept else [], sent)
        if not kept:
            self._mark_lost([job])
        elif cancel:
            self._mark_cancelled([job.id])
        return kept

    def tick(self) -> None:
        """Extend every held lease in one statement; mark the ones no longer ours, and the
        ones an operator asked to cancel."""
        with self._ticking:
            with self._lock:
                held = [job for job in self._held.values() if job.id not in self._lost]
            if not held:
                return
            sent = self.monotonic()
            try:
                kept = self.store.extend_many(held, self.lease)
            except Exception:  # the session may be gone: leases run out unextended
                self._lapsed(held)
                raise
            self._extended(list(kept), sent)
        self._mark_lost([job for job in held if job.id not in kept])
        self._mark_cancelled([job_id for job_id, cancel in kept.items() if cancel])

    def check_cancels(self) -> None:
        """Read the held jobs' cancel marks (no lease written); mark the ones cancelled."""
        with self._ticking:  # as tick(): a job forgotten (snoozed) is never named after
            with self._lock:
                held = [job for job in self._held.values() if job.id not in self._lost]
            if not held:
                return
            try:
                cancelled = self.store.cancel_requested(held)
            except Exception:
                self._lapsed(held)
                raise
        self._mark_cancelled(sorted(cancelled))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def mark_lost(self, jobs: list[ClaimedJob]) -> None:
        """These held attempts were found taken over (a suspect's start mark missed them)."""
        self._mark_lost(jobs)

    def _extended(self, ids: list[int], sent: float) -> None:
        """These leases were pushed to `lease` from the moment the extension was sent."""
        ends = sent + self.lease.total_seconds()
        with self._lock:
            for job_id in ids:
                if job_id in self._ends:
                    self._ends[job_id] = ends

    def _lapsed(self, jobs: list[ClaimedJob]) -> None:
        """A statement of the keeper failed: mark lost the jobs whose lease has run out."""
        now = self.monotonic()
        with self._lock:
            over = [job for job in jobs if self._ends.get(job.id, now + 1) <= now]
        if over:
            self._mark_lost(over)

    def _forget_marks(self, job_id: int) -> None:
        """(The caller holds the lock.)"""
        self._lost.discard(job_id)
        self._cancelled.discard(job_id)
        self._events.pop(job_id, None)

    def _mark_lost(self, jobs: list[ClaimedJob]) -> None:
        """Mark these attempts lost if this keeper still holds them.

        Why only those: the extension that found a job gone was sent with the attempt
        held when the heartbeat took its list. A job released meanwhile had its outcome
        recorded (a failure queued for its retry, a completion): that attempt lost nothing,
        and a warning would tell the operator it did. And a job released and claimed again
        meanwhile is held under a newer attempt, which the old extension could not touch:
        marked lost, its outcome would never be written, and the job would run once more
        after its lease ran out."""
        for job in jobs:
            with self._lock:
                held = self._held.get(job.id)
                if held is None or held.attempts != job.attempts:
                    continue
                self._lost.add(job.id)
                pair = self._events.get(job.id)
            log.warning(
                "lease lost: job %s now belongs to another attempt",
                job.id,
                extra={"job_id": job.id},
            )
            if pair is not None:
                pair[0].set()

    def _mark_cancelled(self, ids: list[int]) -> None:
        told = []
        with self._lock:  # only jobs still held: a released one has nobody to tell
            for job_id in ids:
                if job_id in self._cancelled or not (
                    job_id in self._held or job_id in self._events
                ):
                    continue
                self._cancelled.add(job_id)
                told.append((job_id, self._events.get(job_id)))
        for job_id, pair in told:
            log.warning("job %s: cancel requested by an operator", job_id)
            if pair is not None:
                pair[1].set()

    def _run(self) -> None:
        assert self.interval is not None
        step = min(self.interval, self.cancel_interval or self.interval)
        extended = beat = time.monotonic()
        while not self._stop.wait(self._wait(beat + step - time.monotonic())):
            if time.monotonic() >= beat + step - step / 100:  # a beat (not only a lapse)
                try:
                    if time.monotonic() - extended >= self.interval - step / 2:
                        extended = time.monotonic()
                        self.tick()
                    else:
                        self.check_cancels()
                except Exception:  # the main loop meets the same fault on its next statement
                    log.exception("lease extension failed")
                # the next beat a step after this one's work ended, as before the lapse
                # watch: an extension held up (a slow server, a parked test) is not
                # followed at once by another, which would race a `forget` waiting for it
                beat = time.monotonic()
            self._check_lapse()

    def _wait(self, to_beat: float) -> float:
        """Seconds until the next beat, or the lapse if sooner (only while jobs are held)."""
        left = self.lapse.seconds_left() if self.lapse is not None and self._held else None
        return max(0.0, to_beat if left is None else min(to_beat, left))

    def _check_lapse(self) -> None:
        if self.lapse is None or not self._held:  # between batches the next claim renews it
            return
        try:
            self.lapse.check()
        except Exception:  # once per lapse: the worker's next claim, or its exit, sees the job
            log.exception("could not act on the lapse of the announcement")
