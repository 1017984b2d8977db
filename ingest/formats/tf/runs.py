"""Which run of a repeated TF node fed which run of its consumer.

In a ``tf.while_loop`` the same node runs once per iteration under the same
name, and a StepStats record says nothing about the frame or iteration it
ran in: only its name, its times and its inputs by name (the timeline
label). Linking every consumer to "the" node of an input name collapses the
loop. This module decides, for every run of every consumer and every
input, the run of the producer that fed it.

Every run gets a *tag*: the loop iteration it ran in, one counter per
nesting level (``()`` outside loops, ``(3,)`` in the fourth iteration of a
loop, ``(1, 0)`` in a loop nested in another), or ``None`` while unknown.
TF's rules for v1 control flow (these op types and their ``Ref`` forms)
give the tags:

* a node's inputs come from its own frame iteration, so it takes their tag;
  ``Enter`` hands a value to iteration 0 of a loop (when a ``Merge`` reads
  it) or to every iteration (a loop invariant: anything else reads it);
  ``NextIteration`` to the next iteration; ``Exit`` back to the enclosing
  frame; a ``Merge`` fires once per iteration on the one input that
  arrived, and reads only that one;
* a node runs at most once per frame iteration, so a run takes the lowest
  iteration that all its inputs offer and no earlier run of the same name
  took; a ``Switch`` run outputs on one port, so once a reader took one
  port of it, it is no candidate for the other.

A producer run is a candidate when it was *ready* (its outputs existed) no
later than the consumer run started. Among the candidates of the chosen
iteration the most recent is taken. Nodes without (visible) inputs run in a
loop (constants: TF activates them through control edges the timeline label
does not show) have no tag of their own: the first reader inside a loop
claims the oldest unclaimed ready one for its iteration. A node recorded
once without inputs is in the root frame. A loop entered from a value of
unknown tag (such a constant in an enclosing loop) runs with unknown tags
until a reader of known iteration claims its runs; meanwhile its runs are
linked by the plain rule below (a Merge reading the input that arrived
last). Once every link is chosen, tags still unknown are filled in along
the links (they only set the ``iteration`` of an op).

So a trace without loop control flow, where every tag is ``()`` or unknown,
follows the plain rule: **each input is fed by the most recent run of the
producer that was ready no later than the consumer started**. When no run
of the producer was ready by then (clocks of different devices, a malformed
trace), the most recent run that had started by then, else the producer's
first run; a Merge is then left unfed. A producer recorded once is always
linked (as before there were runs), whatever the times say.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TypeGuard, cast

ENTER = {"Enter", "RefEnter"}
EXIT = {"Exit", "RefExit"}
NEXT = {"NextIteration", "RefNextIteration"}
MERGE = {"Merge", "RefMerge"}
SWITCH = {"Switch", "RefSwitch"}
# Runs whose tag is not the one they hand on: never claimed for an iteration.
_NOT_CLAIMED = ENTER | EXIT | NEXT

# A run's loop iteration, one counter per nesting level; None entries (an
# iteration not known yet) match any. Concrete: every counter known.
Tag = tuple[int | None, ...]
ConcreteTag = tuple[int, ...]
# A candidate producer run and the tag it offers the consumer.
Offer = tuple[int, Tag | None]


@dataclass(slots=True)
class Run:
    """One op record. ``start``/``ready``/``end`` are integers on one clock (ns):
    ``ready`` is when its outputs existed (its op end when recorded, since
    TF hands outputs on before a record's all-end; else its end).
    ``inputs`` are ``(position in the label, producer name, output slot)``,
    slot None for a control input."""

    name: str
    type: str | None
    start: int
    ready: int
    end: int
    inputs: list[tuple[int, str, int | None]]
    tag: Tag | None = None
    run: int = 0  # 0-based index among the runs of the same name, by start
    used_slots: set[int] | None = None  # output slots a consumer read (set on first read)


def link(runs: list[Run]) -> list[list[int | None]]:
    """For every run (same order as ``runs``), the index of the run that fed
    each of its inputs (None: no record of that producer, or a ``Merge``
    input that did not fire). Sets ``tag`` and ``run`` on every run."""
    index = {r.name: i for i, r in enumerate(runs)}
    if len(index) == len(runs):
        return _link_unique(runs, index)
    by_name: dict[str, list[int]] = {}
    for i, r in enumerate(runs):
        by_name.setdefault(r.name, []).append(i)
    for lst in by_name.values():
        if len(lst) > 1:
            lst.sort(key=lambda i: (runs[i].start, i))
            for n, i in enumerate(lst):
                runs[i].run = n
        elif not runs[lst[0]].inputs:
            runs[lst[0]].tag = ()
    linker = _Linker(runs, by_name)
    picks: list[list[int | None]] = [[] for _ in runs]
    for i in sorted(range(len(runs)), key=lambda i: (runs[i].start, runs[i].ready, i)):
        picks[i] = linker.link_one(i)
    _complete_tags(runs, picks)
    return picks


def _complete_tags(runs: list[Run], picks: list[list[int | None]]) -> None:
    """Tags still unknown or partly known after linking (a loop entered from
    a constant that TF records without inputs, a loop invariant) taken from
    the runs they are linked to: a consumer has its producer's offer, a
    producer what its consumer's tag implies. Only fills ``tag`` (for the
    ``iteration`` of an op); the links are already chosen."""
    readers: list[list[int]] = [[] for _ in runs]
    for i, fed in enumerate(picks):
        for q in fed:
            if q is not None:
                readers[q].append(i)
    todo = [i for i, r in enumerate(runs) if _concrete(r.tag)]
    while todo:
        i = todo.pop()
        me = runs[i]
        for q in picks[i]:  # backwards: what fed a run of iteration T
            if q is not None and not _concrete(runs[q].tag):
                tag = _producer_tag(runs[q], me)
                if _concrete(tag) and _matches(runs[q].tag, tag):
                    runs[q].tag = tag
                    todo.append(q)
        for c in readers[i]:  # forwards: what a run of iteration T fed
            if not _concrete(runs[c].tag):
                tag = _offer(me, runs[c].type)
                if _concrete(tag) and _matches(runs[c].tag, tag):
                    runs[c].tag = tag
                    todo.append(c)


def _producer_tag(q: Run, consumer: Run) -> Tag | None:
    """The tag of producer ``q`` implied by the tag of a run it fed (a
    concrete one: :func:`_complete_tags` asks only for those)."""
    tag = cast("ConcreteTag | None", consumer.tag)
    if q.type in ENTER:
        return tag[:-1] if tag else None
    if q.type in NEXT:
        return (*tag[:-1], tag[-1] - 1) if tag and tag[-1] > 0 else None
    if q.type in EXIT:
        return None  # the iteration it left the loop in is not known from outside
    return tag


def _link_unique(runs: list[Run], index: dict[str, int]) -> list[list[int | None]]:
    """Every name recorded once (no loop ran): each input is its producer's
    only run; what :func:`link` gives such a trace, without the tags."""
    picks: list[list[int | None]] = []
    get = index.get
    for i, me in enumerate(runs):
        fed = [get(name) for _, name, _ in me.inputs]
        if i in fed:
            fed = [None if p == i else p for p in fed]
        if me.type in MERGE:
            first = next((k for k, p in enumerate(fed) if p is not None), None)
            fed = [p if k == first else None for k, p in enumerate(fed)]
        picks.append(fed)
    return picks


class _Linker:
    """The state of one pass over the runs in start order.

    ``used[name]`` holds the iterations a node's runs took so far. For speed
    on long loops, each (consumer name, input position) keeps a window start
    into the producer's runs: runs before it can no longer be chosen for it
    (this input already read them and their iteration is taken, or they are
    Switch runs that output on the other port), so candidates are looked for
    from there; the whole list is the fallback when the window has none.
    """

    def __init__(self, runs: list[Run], by_name: dict[str, list[int]]):
        self.runs = runs
        self.by_name = by_name
        self.starts = {n: [runs[i].start for i in lst] for n, lst in by_name.items() if len(lst) > 1}
        self.used: dict[str, set[ConcreteTag]] = {}
        self.lo: dict[tuple[str, int], int] = {}
        self.read: dict[tuple[str, int], set[int]] = {}

    def link_one(self, i: int) -> list[int | None]:
        runs = self.runs
        me = runs[i]
        merge = me.type in MERGE
        used = self.used.setdefault(me.name, set())
        offers: list[list[Offer]] = []
        for k, (_, name, slot) in enumerate(me.inputs):
            cands = self._candidates(i, k, name, slot, merge, used)
            offers.append([(q, _offer(runs[q], me.type)) for q in cands])
        tag = _merge_tag(offers, used) if merge else _tag(offers, used)
        if tag is None and not me.inputs:
            tag = me.tag  # set before: the root frame, or claimed by an early reader
        me.tag = tag
        if _concrete(tag):
            used.add(tag)
        picks: list[int | None] = []
        for (_, _name, slot), offered in zip(me.inputs, offers):
            q = _pick(runs, offered, tag, exact_only=merge)
            if q is not None and slot is not None:
                fed_run = runs[q]
                if fed_run.used_slots is None:
                    fed_run.used_slots = set()
                fed_run.used_slots.add(slot)
            picks.append(q)
        if merge:
            # A Merge reads the one input that fired: the one of its
            # iteration, or (iteration unknown) the one that arrived last.
            fed = [(k, p) for k, p in enumerate(picks) if p is not None]  # (input, producer run)
            if tag is None and fed:
                fed = [max(fed, key=lambda kp: (runs[kp[1]].ready, runs[kp[1]].start))]
            picks = [p if fed and k == fed[0][0] else None for k, p in enumerate(picks)]
        for k, q in enumerate(picks):
            if q is not None and len(self.by_name[me.inputs[k][1]]) > 1:
                self.read.setdefault((me.name, k), set()).add(q)
        return picks

    def _candidates(
        self, i: int, k: int, name: str, slot: int | None, merge: bool, used: set[ConcreteTag]
    ) -> list[int]:
        """Runs of producer ``name`` that could have fed input ``k`` of run
        ``i``, oldest first. A Merge fires on an input that arrived: only
        runs ready by its start."""
        runs = self.runs
        me = runs[i]
        producers = self.by_name.get(name, [])
        if len(producers) <= 1:
            return (
                []
                if not producers or producers[0] == i or (merge and runs[producers[0]].ready > me.start)
                else producers
            )
        hi = bisect.bisect_right(self.starts[name], me.start)
        key = (me.name, k)
        lo = self._advance(key, producers, slot, me.type, used, hi)

        def ok(p: int) -> bool:
            return p != i and runs[p].ready <= me.start and not _other_port(runs[p], slot)

        found = _oldest_and_latest(producers, lo, hi, ok) or (_oldest_and_latest(producers, 0, lo, ok) if lo else [])
        if found or merge:
            return found
        started = [p for p in producers[:hi] if p != i]
        return started[-1:] or [p for p in producers if p != i][:1]

    def _advance(
        self,
        key: tuple[str, int],
        producers: list[int],
        slot: int | None,
        consumer_type: str | None,
        used: set[ConcreteTag],
        hi: int,
    ) -> int:
        """Move the window start of ``key`` past runs it can no longer take."""
        runs = self.runs
        lo = self.lo.get(key, 0)
        read: Collection[int] = self.read.get(key, ())
        while lo < hi:
            q = runs[producers[lo]]
            if _other_port(q, slot):
                lo += 1
                continue
            offer = _offer(q, consumer_type)
            if producers[lo] in read and _concrete(offer) and offer in used:
                lo += 1
                continue
            break
        self.lo[key] = lo
        return lo


# How many of the oldest candidates a consumer input looks at (plus the
# most recent one): a loop's fast variables can run far ahead of a slow
# reader, and the iteration it needs is among the oldest it has not read.
WINDOW = 64


def _oldest_and_latest(producers: list[int], lo: int, hi: int, ok: Callable[[int], bool]) -> list[int]:
    """Up to WINDOW of ``producers[lo:hi]`` that pass ``ok``, oldest first,
    and the last one that passes, in start order."""
    out: list[int] = []
    for j in range(lo, hi):
        if ok(producers[j]):
            out.append(producers[j])
            if len(out) == WINDOW:
                for back in range(hi - 1, j, -1):
                    if ok(producers[back]):
                        out.append(producers[back])
                        break
                break
    return out


def _other_port(q: Run, slot: int | None) -> bool:
    """A Switch run outputs on one port: once a reader took another port of
    it, it did not output on ``slot``."""
    return slot is not None and q.type in SWITCH and q.used_slots is not None and bool(q.used_slots - {slot})


def _offer(q: Run, consumer_type: str | None) -> Tag | None:
    """The tag a run of ``q`` hands to a consumer of the given type; None
    entries match any iteration."""
    tag = q.tag
    if tag is None:  # unknown: matches any (an Enter of an untagged value included)
        return None
    if q.type in ENTER:
        return tag + ((0,) if consumer_type in MERGE else (None,))
    if q.type in NEXT:
        return (*tag[:-1], None if tag[-1] is None else tag[-1] + 1) if tag else tag
    if q.type in EXIT:
        return tag[:-1]
    return tag


def _concrete(tag: Tag | None) -> TypeGuard[ConcreteTag]:
    return tag is not None and None not in tag


def _matches(offer: Tag | None, tag: Tag | None) -> bool:
    if offer is None or tag is None:
        return True
    return len(offer) == len(tag) and all(o is None or o == t for o, t in zip(offer, tag))


def _tag(offers: list[list[Offer]], used: set[ConcreteTag]) -> Tag | None:
    """The iteration of a plain op: the lowest one every tagged input offers
    (one not yet taken by an earlier run of the same name if possible)."""
    # An input with a candidate of unknown iteration could match any: only
    # inputs whose candidates all have one constrain the choice.
    offered = [{o for _, o in cands} for cands in offers]
    sets = [cast("set[ConcreteTag]", s) for s in offered if s and all(map(_concrete, s))]
    if sets:
        common = set.intersection(*sets) or sets[0]
        free = common - used
        return min(free or common)
    # No input tells: a loop invariant's frame is still something (its
    # iteration left open); a mix of known and unknown runs is nothing.
    partial = [o for cands in offers for _, o in cands if o is not None and not _concrete(o)]
    return partial[0] if partial else None


def _merge_tag(offers: list[list[Offer]], used: set[ConcreteTag]) -> Tag | None:
    """A Merge fires on whichever input arrives: the lowest offered
    iteration it has not fired for yet."""
    tags = {o for cands in offers for _, o in cands if _concrete(o)}
    free = tags - used
    if free:
        return min(free)
    return min(tags) if tags else None


def _pick(runs: list[Run], cands: list[Offer], tag: Tag | None, exact_only: bool = False) -> int | None:
    """The producer run of one input for a consumer of iteration ``tag``."""
    if not cands:
        return None
    if _concrete(tag):
        exact = [q for q, o in cands if o == tag]
        if exact:
            return exact[-1]
        if exact_only:
            return None
        loose = [(q, o) for q, o in cands if _matches(o, tag)]
        if loose and tag:
            # Inside a loop: the oldest untagged run is claimed for this
            # iteration (it takes the tag, so later readers of the same
            # iteration find it above as an exact match).
            free = [q for q, _ in loose if runs[q].tag is None and runs[q].type not in _NOT_CLAIMED]
            if free:
                runs[free[0]].tag = tag
                return free[0]
        if loose:
            return loose[-1][0]
    elif exact_only:
        matching = [q for q, o in cands if _matches(o, tag)]
        return matching[-1] if matching else None
    return cands[-1][0]
