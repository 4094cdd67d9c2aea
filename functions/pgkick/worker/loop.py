"""The worker's loop: claim a batch, run it with no transaction open, record outcomes, repeat.

Why it stops by itself: a serverless worker must end while there is time left
and must leave nothing open, so a scale-to-zero database can sleep. It drains
until a claim comes back empty, or until the remaining time is too short for
another batch (then it re-kicks itself); a job of its claim does not start once the
time left is below the reserve, it goes back to the queue for that re-kick. A full
batch fans out one more kick, so a backlog spreads over as many workers as the
concurrency cap allows.

Outcomes are fenced: a job whose lease was lost is abandoned without a write.
Successes are completed together with the next claim, in one statement; a claim's
jobs are run and their outcomes sorted by pgkick.worker.claim_run (flushed early
when jobs are slow, so a crash re-runs little). What each ending writes and sets in
motion is pgkick.worker.outcomes'.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pgkick.kick.kickers import Kicker
from pgkick.kick.safety import kick_with_safety, wake_after_failed_kick
from pgkick.kick.watch import WorkerWatch
from pgkick.store.healing import QueuePlan
from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick.tasks.registry import Registry
from pgkick.worker.batch_run import BatchWindow
from pgkick.worker.claim_run import ClaimRun
from pgkick.worker.continuation import StepBooks
from pgkick.worker.healing import heal_queues, stay_for
from pgkick.worker.lapse import LapseKick
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.linger import WakeUpLine
from pgkick.worker.options import Summary, WorkerOptions, backoff_jitter, check_options
from pgkick.worker.outcomes import Outcomes
from pgkick.worker.rescue import DeadMansSwitch
from pgkick.worker.spawn import Spawns

log = logging.getLogger("pgkick.worker")

__all__ = ["Summary", "Worker", "WorkerOptions", "backoff_jitter"]


class Worker:
    def __init__(
        self, store: WorkerStore, registry: Registry, kicker: Kicker, options: WorkerOptions
    ) -> None:
        self.store = store
        self.registry = registry
        self.kicker = kicker
        self.options = check_options(options)  # bad values refused before any claim
        # How a lingering worker waits and tells time; tests pass their own.
        self.sleep: Callable[[float], None] = time.sleep
        self.monotonic: Callable[[], float] = time.monotonic
        # A retry's backoff factor, 0.9..1.1 (River's ±10%): retries of a failed burst
        # spread out instead of returning in lockstep. Tests pass a seeded source.
        self.jitter: Callable[[], float] = backoff_jitter(random.Random(), options.backoff_jitter)
        # Whether `queue` had a one-off kick recently (the runtime remembers it per execution
        # environment, across invocations); the bare loop remembers nothing.
        self.flows: Callable[[str], bool] = lambda queue: False
        # Whether a timer sent this drain (a wake-up, its safety, a rescue) rather than a
        # producer or a worker: finding nothing at once, it has no flow to linger on.
        self.timed = False
        self._hop = 0
        self._held_checked = False
        self._stayed = False  # it stayed for its queue (pgkick.worker.healing.stay_for)

    def drain(self, queue: str, remaining_ms: Callable[[], int], *, hop: int = 0) -> Summary:
        """Work `queue` until it is empty or time runs short; never raises for a job's error.

        `hop`: how many invocations of this worker chain came before this one (the
        kick event's); its own kicks carry hop + 1 (see `_kick`)."""
        started = time.monotonic()
        summary = Summary(queue=queue)
        interval = self.options.lease.total_seconds() / 3 if self.options.heartbeat else None
        cancel_check = self.options.cancel_check.total_seconds() if interval else None
        keeper = LeaseKeeper(
            self.store, self.options.lease, interval=interval, cancel_interval=cancel_check
        )
        watch = WorkerWatch(
            ttl=self.options.watch_ttl, linger=self.options.linger, clock=self.monotonic
        )
        line = WakeUpLine(self.store, queue, watch, mode=self.options.listen, sleep=self.sleep)
        self._hop = hop
        # a job left to this worker while its batch runs past its announcement: kicked for
        # at the lapse, by the heartbeat's thread (pgkick.worker.lapse)
        keeper.lapse = lapse = LapseKick(
            self.store,
            self.kicker,
            queue,
            watch,
            pending=self.options.kick_pending,
            safety=self.options.kick_safety,
            failed_wake=self.options.failed_kick_wake,
            hop=hop + 1,
            max_hops=self.options.max_hops,
        )
        books = StepBooks(self.store, remaining_ms, self.options.min_remaining)
        spawns = Spawns(self.store)
        outcomes = Outcomes(
            self.store, self.kicker, self.options, jitter=self.jitter, hop=hop, spawns=spawns
        )
        claims = ClaimRun(self.registry, self.store, self.options, books, spawns, outcomes)
        claims.remaining_ms = remaining_ms
        self._held_checked = False  # flow_held: asked once per idle window
        self._stayed = False
        swept = False  # left after the exit sweep (a worker leaving empty sweeps to decide)
        handed = True  # False: a hand-over whose kick and wake-up both failed
        # after its announcement too has lapsed (pgkick.worker.rescue says why)
        after = self.options.lease + self.options.watch_ttl
        rescue = DeadMansSwitch(self.kicker, queue, watch.watcher, after=after)
        longest_batch_ms = 0  # measured on the invocation's own clock
        last_batch_full = False
        full_since: float | None = None  # when this run of full batches began
        finished: list[ClaimedJob] = []  # run, not yet recorded: they ride with the next claim
        first_claim: int | None = None  # jobs the invocation's first claim got
        window = BatchWindow(self.registry, lambda: self.monotonic())  # batch_window's hold
        try:
            while True:
                before = remaining_ms()
                reserve = self.options.min_remaining.total_seconds() * 1000 + longest_batch_ms
                # another batch might not finish in time, or a job asked for a fresh one
                if before < reserve or books.continued:
                    if window.held:  # claimed already: run now, not left to their leases
                        finished = claims.run(window.release(), keeper, summary, finished)
                    outcomes.complete(finished, keeper, summary)
                    handed = self._hand_over(queue, watch, last_batch_full, summary)
                    break
                announce = watch.announcement()
                held, jobs = self.store.complete_many_and_claim(
                    finished, queue, batch=self.options.batch, lease=self.options.lease,
                    announce=announce,
                )  # fmt: skip
                if announce is not None:
                    watch.announced()  # committed: the promise the heartbeat watches
                outcomes.account(finished, held, keeper, summary)
                outcomes.kick_dependants(queue, self.store.take_released(), summary)
                finished = []
                if first_claim is None:
                    first_claim = len(jobs)
                if not jobs and window.held:  # nothing more to group them with: run them now
                    finished = claims.run(window.release(), keeper, summary)
                    continue
                if not jobs:
                    one_off = first_claim == 1 and summary.claimed == 1
                    if one_off and not self.flows(queue):
                        watch.skip_linger()  # the kick's one job, nothing after (see flows)
                    elif self.timed and summary.claimed == 0:
                        watch.skip_linger()  # a safety or a wake-up with nothing to do
                    last = self._linger_or_leave(queue, watch, line, remaining_ms, reserve)
                    if last is None:
                        continue  # lingered: claim again
                    if not last:
                        wait = self._stay(queue, summary, remaining_ms, reserve)  # swept
                        if wait is None:
                            summary.stopped_because, swept = "empty", True
                            break
                        self.sleep(wait)
                        continue  # claim again (announced again with it)
                    jobs = last
                watch.busy()
                self._held_checked = self._stayed = False
                rescue.arm()
                summary.batches += 1
                summary.claimed += len(jobs)
                last_batch_full = len(jobs) == self.options.batch
                full_since = (full_since or self.monotonic()) if last_batch_full else None
                if self._fan_out_now(full_since, summary):
                    summary.fanouts += int(self._kick(queue, "fanout"))
                keeper.hold(jobs)  # (only the new claim: a held-back job keeps its marks)
                # a claim with suspects runs at once: a batch group held back would be left
                # to its lease, unrecorded, if a suspect killed the worker
                full = last_batch_full and not any(job.lapsed for job in jobs)
                finished = claims.run(window.take(jobs, full=full), keeper, summary)
                longest_batch_ms = max(longest_batch_ms, before - remaining_ms())
            if not swept:
                self._heal(queue, summary)
            if handed:  # a clean finish; after a crash, or a queue handed to nobody, it fires
                rescue.disarm()
        finally:
            spawns.drop_all()  # a run not completed by now never wrote its children
            line.close()  # still listening only if it left without withdrawing through it
            keeper.close()
            summary.lapse_kicks = lapse.kicks
            summary.duration_ms = int((time.monotonic() - started) * 1000)
        return summary

    def _stay(
        self, queue: str, summary: Summary, remaining_ms: Callable[[], int], reserve: float
    ) -> float | None:
        """Withdrawn, its last claim empty: sweep, then the seconds to wait before claiming its
        own queue again (a job due within the allowance that no one was kicked for:
        pgkick.worker.healing.stay_for), or None to leave. Once per idle spell: a stay whose
        claim finds nothing (another worker took the job) leaves at the next try."""
        own = self._heal(queue, summary)
        wait = None if self._stayed else stay_for(own)
        if wait is None or remaining_ms() - wait * 1000 <= reserve:
            return None
        self._stayed = True
        return wait

    def _heal(self, queue: str, summary: Summary) -> QueuePlan | None:
        """Leaving: book each queue's next wake-up and kick the ready queues nobody will see
        (pgkick.worker.healing), so a lost kick or wake-up never waits for the reaper.
        Returns its own queue's row (None: no queued job, or no sweep)."""
        if not self.options.heal:
            return None
        try:
            healed = heal_queues(
                self.store,
                self.kicker,
                pending=self.options.kick_pending,
                safety=self.options.kick_safety,
                skip=queue,
                failed_wake=self.options.failed_kick_wake,
            )
        except Exception:  # a sweep that fails loses nothing: the next one, or the reaper
            log.exception("could not sweep the queues while leaving %s", queue)
            return None
        summary.healed_kicks += len(healed.kicked)
        summary.healed_wakes += len(healed.woken)
        return healed.own

    def _fan_out_now(self, full_since: float | None, summary: Summary) -> bool:
        """Ask for one more worker once full batches have kept coming for `fanout_after`.

        Why wait: a new worker needs a cold start (hundreds of ms); a backlog this
        worker clears sooner than that would only wake a second invocation, and a
        database session, to find nothing."""
        return (
            full_since is not None
            and summary.fanouts < self.options.max_fanout
            and self.monotonic() - full_since >= self.options.fanout_after.total_seconds()
        )

    def _linger_or_leave(
        self,
        queue: str,
        watch: WorkerWatch,
        line: WakeUpLine,
        remaining_ms: Callable[[], int],
        reserve: float,
    ) -> list[ClaimedJob] | None:
        """The queue is empty: pause (cut short by a producer's NOTIFY, pgkick.worker.linger)
        and return None (claim again), or withdraw and claim once more (the protocol of
        pgkick.kick.watch), returning what that last claim got."""
        pause = watch.next_pause()
        if pause is not None and not self._held_checked:
            # Work held by a pause or a rate is not waited for (billed time, a held
            # connection): leave now; the exit sweep books the rate's next admission.
            self._held_checked = True
            if self.store.flow_held(queue):
                pause = None
        if pause is not None and remaining_ms() - pause * 1000 > reserve:
            line.wait(pause)
            return None
        jobs = self.store.withdraw_and_claim(
            queue,
            watch.watcher,
            batch=self.options.batch,
            lease=self.options.lease,
            unlisten=line.withdrawing(),
        )
        watch.withdrawn()  # if it got jobs, the next claim announces this worker again
        return jobs

    def _hand_over(
        self, queue: str, watch: WorkerWatch, last_batch_full: bool, summary: Summary
    ) -> bool:
        """Out of time: withdraw, then hand the queue to a fresh invocation if work is left.
        False: handed to nobody (its kick failed, and the wake-up that heals a failed kick
        too): the rescue stays armed.

        The ready check runs after the withdrawal, so a job a producer left to this
        worker is seen by it (and kicked for) or by the producer's own check."""
        summary.stopped_because = "time"
        self.store.withdraw(queue, watch.watcher)
        if last_batch_full or self.store.ready_exists(queue):
            summary.rekicked = self._kick(queue, "rekick")
            if not summary.rekicked:
                after = self.options.failed_kick_wake
                return wake_after_failed_kick(self.kicker, queue, after=after)
        return True

    def _kick(self, queue: str, reason: str) -> bool:
        """Kick this worker's own function, one hop further down the chain.

        Past `max_hops` a self-invocation could be cut by Lambda's recursive-loop
        detection (about 16 invocations of one chain): book a wake-up instead, which
        the scheduler delivers as a fresh chain."""
        hop = self._hop + 1
        try:
            if hop > self.options.max_hops:
                log.info("chain of %s hops on queue %s: handing over by a wake-up", hop, queue)
                self.kicker.wake_at(queue, datetime.now(UTC))
            else:
                # a lost rekick strands the queue: its safety; a fan-out's worker is extra
                safety = self.options.kick_safety if reason == "rekick" else timedelta(0)
                kick_with_safety(self.kicker, queue, reason, after=safety, hop=hop)
        except Exception:
            log.exception("could not kick queue %s (%s)", queue, reason)
            return False
        return True
