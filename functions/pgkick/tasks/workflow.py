"""`pgkick.Workflow`: a DAG of jobs built in Python, then enqueued in one transaction
(issue 34, docs/guide/dependencies.md#workflows).

Why a builder over `after=`: with `after=` alone, a DAG is enqueued parent by parent,
each call needing the ids the calls before returned, and a bad node discovered half-way
leaves the first ones committed. Here every node is checked when it is added (its payload,
task and options, as an enqueue checks them; its parents, nodes of this workflow), the
whole graph when it is enqueued, and only then is anything written: one transaction,
one `enqueue_many` per level of the DAG, each level's `after=` holding the ids the level
before got. A node can only name nodes added before it, so a cycle cannot be built.

Why the first node's job id is the workflow's id, and no column: the jobs of one
workflow are exactly the jobs linked to it by `job_dependencies` (one workflow is one
connected graph: enqueue refuses unlinked parts) and created by the same transaction
(one `created_at`: `now()` is the transaction's start). `pgkick workflow ID` walks that
(pgkick.store.workflows); a child a node spawns at run time is not a node of it.
"""

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypedDict, Unpack, cast

from pgkick import aio
from pgkick.connections.db import Clock
from pgkick.errors import InvalidArgumentType, InvalidWorkflow
from pgkick.kick.default import default_kicker
from pgkick.producer.after_commit import kick_committed
from pgkick.producer.enqueue import Enqueuer, producer_store
from pgkick.producer.options import CommitOptions, EnqueueOptions, commit_only
from pgkick.producer.plan import now
from pgkick.store.producer import ProducerStore
from pgkick.tasks.handle import Task, to_json_value
from pgkick.validation import job_spec
from pgkick.validation.dependencies import DEPENDENCY_POLICIES

# Options a node may not take: `after=` is given as nodes; a unique key (and debounce,
# throttle, which use one) may answer with an existing job, which would graft a job of
# another transaction into the workflow.
REFUSED_OPTIONS = ("after", "unique_key", "debounce", "max_delay", "throttle")
_BATCH_PLACE = r"jobs\[(\d+)\]: "  # how enqueue_many names a refused job (compiled once used)


# A parent with its policy: a tuple, or a list of two (as after= with ids takes them).
type NodePair = tuple[Node, str] | list[Node | str]


class NodeOptions(TypedDict, total=False):
    """A node's options: `EnqueueOptions` less those REFUSED_OPTIONS (checked by job_spec)."""

    queue: str
    run_at: datetime | None
    delay: float | timedelta | None
    max_attempts: int
    priority: int
    group: str | None
    rate_key: str | None


class ManyJobSink(Protocol):
    """Where a workflow's jobs go in a transaction someone else commits. pgkick's sinks
    also have `savepoint()`, which `enqueue_with` opens over every level, so a level refused
    rolls back the ones before it and the app's transaction goes on without them."""

    def enqueue_many(self, jobs: Sequence[Mapping[str, Any]], /) -> list[int]: ...


class AsyncManyJobSink(Protocol):
    """The same for asyncio (`pgkick.aio.transaction(conn)`'s enqueuer, whose `savepoint()`
    is an async context manager)."""

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]], /) -> list[int]: ...


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """One job of a workflow, as `Workflow.add` returned it: pass it in a later `after=`."""

    workflow: "Workflow"
    index: int
    task: str

    def __repr__(self) -> str:
        return f"<workflow node {self.index}: {self.task}>"


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    """An enqueued workflow: its id (its first node's job id) and each node's job id."""

    id: int
    job_ids: tuple[int, ...]

    def __getitem__(self, node: Node) -> int:
        return self.job_ids[node.index]


@dataclass(slots=True, eq=False)
class _Job:
    mapping: dict[str, Any]
    after: tuple[tuple[int, str], ...]  # (index of an earlier node, policy)
    level: int


@dataclass(eq=False)
class Workflow:
    """A DAG of jobs, enqueued at once: `add` nodes, then `enqueue` (or `enqueue_with`)."""

    _jobs: list[_Job] = field(default_factory=list)

    def add(
        self,
        task: Any,
        payload: Any,
        *,
        after: Sequence[Node | NodePair] | Mapping[Node, str] | None = None,
        **options: Unpack[NodeOptions],
    ) -> Node:
        """A node running `task` (a name, or a `@pgkick.task` handle) on `payload` once the
        nodes in `after` are done (policies as `after=`'s: fail, cancel, run anyway).
        Checked now, as an enqueue would check it: a bad node raises, and nothing exists
        in the database until `enqueue`."""
        name = task if isinstance(task, str) else getattr(task, "name", task)
        refused = [key for key in REFUSED_OPTIONS if key in options]
        if refused:
            raise InvalidWorkflow(
                f"workflow node {len(self._jobs)} ({name}): {refused[0]}= is not taken by a "
                "workflow node (after= names nodes; a unique key could answer with a job "
                "outside the workflow)"
            )
        given = task.json_value(payload) if isinstance(task, Task) else to_json_value(payload)
        spec = job_spec(given, task=name, **cast(EnqueueOptions, options))
        # The value checked, not the caller's object: a dict reused in a loop, or changed
        # after this add, would be written (or refused, half-way through) as it is then.
        value = json.loads(spec.payload_json)
        parents = self._parents(after, name)
        level = 1 + max((self._jobs[p].level for p, _ in parents), default=-1)
        self._jobs.append(_Job({"payload": value, "task": name, **options}, parents, level))
        return Node(self, len(self._jobs) - 1, name)

    def _parents(self, after: object, name: str) -> tuple[tuple[int, str], ...]:
        where = f"workflow node {len(self._jobs)} ({name}): after"
        if after is None:
            return ()
        if isinstance(after, (str, bytes)) or not isinstance(after, (Sequence, Mapping)):
            raise InvalidArgumentType(f"{where}: a list of nodes, got {type(after).__name__}")
        items = list(after.items()) if isinstance(after, Mapping) else list(after)
        chosen: dict[int, str] = {}
        for item in items:
            # a pair as a tuple, or as a list (as after= with ids takes it: JSON's pairs)
            pair = isinstance(item, (tuple, list)) and len(item) == 2
            node, policy = item if pair else (item, "fail")
            if not isinstance(node, Node):
                raise InvalidArgumentType(
                    f"{where}: {node!r} is not a node; give what Workflow.add returned "
                    "(a job already enqueued: enqueue the workflow's jobs with after= instead)"
                )
            if node.workflow is not self:
                raise InvalidWorkflow(f"{where}: {node!r} is a node of another workflow")
            if policy not in DEPENDENCY_POLICIES:
                raise InvalidWorkflow(
                    f"{where}: unknown policy {policy!r} for {node!r}; use one of "
                    f"{', '.join(repr(p) for p in DEPENDENCY_POLICIES)}"
                )
            if chosen.setdefault(node.index, policy) != policy:
                raise InvalidWorkflow(f"{where}: {node!r} is given twice, with two policies")
        return tuple(chosen.items())

    def check(self) -> None:
        """The whole graph: not empty, and one connected DAG (so `pgkick workflow ID` finds
        every node from the first one's id; independent parts are separate workflows)."""
        if not self._jobs:
            raise InvalidWorkflow("workflow: no node; add one with Workflow.add before enqueue")
        group = list(range(len(self._jobs)))  # union-find over the links

        def root(i: int) -> int:
            while group[i] != i:
                group[i] = group[group[i]]
                i = group[i]
            return i

        for child, job in enumerate(self._jobs):
            for parent, _ in job.after:
                group[root(child)] = root(parent)
        apart = [i for i in range(len(self._jobs)) if root(i) != root(0)]
        if apart:
            raise InvalidWorkflow(
                f"workflow: node {apart[0]} ({self._jobs[apart[0]].mapping['task']}) is linked "
                "to no path from node 0; a workflow is one connected graph (enqueue independent "
                "parts as workflows of their own)"
            )

    def enqueue_with(self, jobs: ManyJobSink) -> WorkflowRun:
        """Enqueue into a transaction someone else commits (`pgkick.transaction(conn)`,
        `pgkick.enqueue_in(conn)`): kicked after that commit, the roots only."""
        self.check()
        ids: list[int] = [0] * len(self._jobs)
        savepoint = getattr(jobs, "savepoint", None)  # pgkick's sinks: one over every level
        with savepoint() if savepoint is not None else nullcontext():
            for level in self._levels():
                batch = [self._with_ids(self._jobs[i], ids) for i in level]
                try:
                    got = jobs.enqueue_many(batch)
                except (TypeError, ValueError) as exc:
                    raise self._named(exc, level) from None
                for i, job_id in zip(level, got, strict=True):
                    ids[i] = job_id
        return WorkflowRun(ids[0], tuple(ids))

    def enqueue(self, **where: Unpack[CommitOptions]) -> WorkflowRun:
        """Enqueue every node in one transaction of its own, then kick the roots' queues
        (each other node is kicked by the worker that completes its last parent)."""
        dsn, kicker, clock = commit_only("Workflow.enqueue", where)
        self.check()
        kicker = kicker or default_kicker()  # a bad setting fails before anything is written
        with _one_transaction(dsn, clock) as enqueuer:
            run = self.enqueue_with(enqueuer)
        kick_committed(enqueuer.queued, kicker, lambda: producer_store(dsn, clock), now=now(clock))
        return run

    async def enqueue_with_async(self, jobs: AsyncManyJobSink) -> WorkflowRun:
        """`enqueue_with` for asyncio: into `pgkick.aio.transaction(conn)`, kicked after
        the app's commit, the roots only."""
        self.check()
        ids: list[int] = [0] * len(self._jobs)
        savepoint = getattr(jobs, "savepoint", None)  # pgkick's sinks: one over every level
        async with savepoint() if savepoint is not None else nullcontext():
            for level in self._levels():
                batch = [self._with_ids(self._jobs[i], ids) for i in level]
                try:
                    got = await jobs.enqueue_many(batch)
                except (TypeError, ValueError) as exc:
                    raise self._named(exc, level) from None
                for i, job_id in zip(level, got, strict=True):
                    ids[i] = job_id
        return WorkflowRun(ids[0], tuple(ids))

    async def enqueue_async(self, **where: Unpack[CommitOptions]) -> WorkflowRun:
        """`enqueue` for asyncio: every node in one transaction of its own on one of the
        loop's lingering connections (pgkick.aio), then the roots' queues kicked."""
        commit_only("Workflow.enqueue_async", where)  # a job option here: refused, not dropped
        self.check()  # before a connection is taken
        return await aio.commit_and_kick(self.enqueue_with_async, **where)

    def _named[E: Exception](self, exc: E, level: list[int]) -> E:
        """A level's refusal named by its node, not by its place in the level's batch
        (enqueue_many's `jobs[i]`): the node index and task the caller's add returned."""
        found = re.match(_BATCH_PLACE, str(exc))
        if found is None or int(found[1]) >= len(level):
            return exc
        index = level[int(found[1])]
        task = self._jobs[index].mapping["task"]
        return type(exc)(f"workflow node {index} ({task}): {str(exc)[found.end() :]}")

    @staticmethod
    def _with_ids(job: _Job, ids: list[int]) -> dict[str, Any]:
        """The node's enqueue_many mapping, its parents' job ids (known by now) in after=."""
        return {**job.mapping, "after": [(ids[parent], policy) for parent, policy in job.after]}

    def _levels(self) -> list[list[int]]:
        """Node indexes by depth: every parent of a level is in an earlier one."""
        levels: list[list[int]] = []
        for i, job in enumerate(self._jobs):
            while len(levels) <= job.level:
                levels.append([])
            levels[job.level].append(i)
        return levels

    def __len__(self) -> int:
        return len(self._jobs)


@contextmanager
def _one_transaction(dsn: str | None, clock: Clock) -> Iterator[Enqueuer]:
    store: ProducerStore
    with producer_store(dsn, clock) as store, store.transaction():
        yield Enqueuer(store)
