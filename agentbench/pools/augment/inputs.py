"""Inputs: new arguments for a task's function, derived from its seed asserts.

Type-aware changes of each seed's literal arguments (boundary values, sign flips, empty and one-element
values, shuffles, growth, whitespace and non-ASCII characters) and recombinations of arguments of different
seeds, drawn from a seeded generator and kept, by default, inside the values the seeds pass
(:class:`_Domain`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .seeds import Seed, representable

__all__ = ["generate_inputs", "MAX_CALL", "MAX_LEN"]

MAX_CALL = 400  # longer calls are not generated
MAX_LEN = 40  # generated strings, lists and dicts grow to this length at most
_INT_LIMIT = 10**9
# characters strings gain: whitespace other than a space, punctuation, a non-ASCII letter and digit
_EXTRA_CHARS = (" ", "\t", "\n", "-", "_", ".", "0", "9", "A", "z", "é", "٣")


def _clip(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(-_INT_LIMIT, min(_INT_LIMIT, value))
    return value


def _variants(value: Any, rng: random.Random, depth: int = 0) -> list[Any]:
    """Type-aware neighbours of ``value`` (deterministic given ``rng``'s state)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        out = [0, 1, -1, 2, value + 1, value - 1, -value, value * 2, value // 2, rng.randint(-20, 20)]
        out.append(rng.randint(0, max(10, abs(value) * 3)))
        return [_clip(v) for v in out]
    if isinstance(value, float):
        out = [0.0, 1.0, -1.0, -value, value + 1.0, value - 1.0, value * 2, value / 2, value + 0.5]
        out.append(round(rng.uniform(-2 * abs(value) - 10, 2 * abs(value) + 10), 3))
        return out
    if isinstance(value, str):
        chars = list(value)
        out = ["", value[:1], value[-1:], value[::-1], value.upper(), value.lower(), value.swapcase()]
        out += [f" {value} ", value.replace(" ", "\t"), value.replace(" ", "  "), value[: len(value) // 2]]
        if len(value) <= MAX_LEN // 2:
            out.append(value + value)
        if chars:
            shuffled = chars[:]
            rng.shuffle(shuffled)
            out.append("".join(shuffled))
            i = rng.randrange(len(chars))
            out.append(value[:i] + value[i + 1 :])
            out.append(value[:i] + value[i] + value[i:])
        i = rng.randrange(len(chars) + 1)
        out.append(value[:i] + rng.choice(_EXTRA_CHARS) + value[i:])
        return [v for v in out if len(v) <= MAX_LEN]
    if isinstance(value, list | tuple):
        items = list(value)
        out: list[list[Any]] = [[], items[:1], items[-1:], items[::-1]]
        try:
            out.append(sorted(items))
            out.append(sorted(items, reverse=True))
        except TypeError:
            pass
        if items:
            shuffled = items[:]
            rng.shuffle(shuffled)
            out.append(shuffled)
            i = rng.randrange(len(items))
            out.append(items[:i] + items[i + 1 :])
            out.append(items[:i] + [items[i]] + items[i:])
            if depth < 2:
                for _ in range(2):
                    j = rng.randrange(len(items))
                    options = _variants(items[j], rng, depth + 1)
                    if options:
                        out.append(items[:j] + [rng.choice(options)] + items[j + 1 :])
                options = _variants(rng.choice(items), rng, depth + 1)
                if options:
                    out.append(items + [rng.choice(options)])
            if len(items) <= MAX_LEN // 2:
                out.append(items + items)
        return [tuple(v) if isinstance(value, tuple) else v for v in out if len(v) <= MAX_LEN]
    if isinstance(value, dict):
        keys = list(value)
        out_d: list[dict[Any, Any]] = [{}]
        if keys:
            k = rng.choice(keys)
            out_d.append({key: v for key, v in value.items() if key != k})
            if depth < 2:
                options = _variants(value[k], rng, depth + 1)
                if options:
                    out_d.append({**value, k: rng.choice(options)})
                new_keys = [n for n in _variants(k, rng, depth + 1) if n not in value]
                if new_keys:
                    out_d.append({**value, rng.choice(new_keys): value[k]})
        return out_d
    return []


@dataclass(frozen=True)
class _Domain:
    """What the original asserts pass in one argument position: generated values stay inside it, so
    that a new assert does not test behaviour the spec leaves open (``is_prime(-7)`` or
    ``largest_prime_factor(0)`` when every example is at least 2, ``"ABC"`` when every example string is
    lower case, ``[]`` when no example is empty)."""

    lowest: float | None  # numbers at least this (the smallest example number when none is negative)
    chars: frozenset[str] | None  # None: no strings seen
    empty: bool  # an example string or container here is empty

    @classmethod
    def of(cls, values: list[Any]) -> _Domain:
        numbers: list[float] = []
        chars: set[str] = set()
        seen_str = False
        for v in values:
            for leaf in _leaves(v):
                if isinstance(leaf, bool):
                    continue
                if isinstance(leaf, int | float):
                    numbers.append(leaf)
                elif isinstance(leaf, str):
                    seen_str = True
                    chars.update(leaf)
        lowest = min(numbers) if numbers and min(numbers) >= 0 else None
        empty = any(_has_empty(v) for v in values)
        return cls(lowest, frozenset(chars) if seen_str else None, empty)

    def admits(self, value: Any) -> bool:
        if not self.empty and _has_empty(value):
            return False
        for leaf in _leaves(value):
            if isinstance(leaf, bool):
                continue
            if self.lowest is not None and isinstance(leaf, int | float) and leaf < self.lowest:
                return False
            if self.chars is not None and isinstance(leaf, str) and not set(leaf) <= self.chars:
                return False
        return True


def _has_empty(value: Any) -> bool:
    if isinstance(value, str | list | tuple | dict) and not value:
        return True
    if isinstance(value, list | tuple):
        return any(_has_empty(v) for v in value)
    if isinstance(value, dict):
        return any(_has_empty(v) for v in value.values())
    return False


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in (*_leaves(k), *_leaves(v))]
    return [value]


def _domains(seeds: list[Seed]) -> dict[int | str, _Domain]:
    """Per argument position (index, or keyword name), the domain of the seeds' values there."""
    values: dict[int | str, list[Any]] = {}
    for s in seeds:
        for i, a in enumerate(s.args):
            values.setdefault(i, []).append(a)
        for name, v in s.kwargs:
            values.setdefault(name, []).append(v)
    return {key: _Domain.of(vs) for key, vs in values.items()}


def _type_shape(value: Any) -> str:
    return type(value).__name__


def generate_inputs(
    seeds: list[Seed], rng: random.Random, n: int, strict: bool = True
) -> list[tuple[int, tuple, tuple]]:
    """Up to ``n`` new (seed index, args, kwargs) triples, no two giving the same call, none an original.
    ``strict``: only values inside the seeds' domain of each argument (:class:`_Domain`).

    First every single-argument change of every seed (in a seeded order), then random changes of one or
    two arguments mixed with recombinations of arguments of different seeds with the same type."""
    seen = {s.call(s.args, s.kwargs) for s in seeds}
    out: list[tuple[int, tuple, tuple]] = []
    domains = _domains(seeds) if strict else {}

    def inside(args: tuple, kwargs: tuple) -> bool:
        keyed = [*enumerate(args), *kwargs]
        return all(representable(v) and (k not in domains or domains[k].admits(v)) for k, v in keyed)

    def add(i: int, args: tuple, kwargs: tuple) -> None:
        if len(out) >= n or not inside(args, kwargs):
            return
        text = seeds[i].call(args, kwargs)
        if text in seen or len(text) > MAX_CALL:
            return
        seen.add(text)
        out.append((i, args, kwargs))

    # every argument's neighbours, computed once per seed (the random phase combines them)
    options: list[list[list[Any]]] = [
        [_variants(v, rng) for v in (*s.args, *(value for _, value in s.kwargs))] for s in seeds
    ]

    def with_value(s: Seed, pos: int, value: Any, args: tuple, kwargs: tuple) -> tuple[tuple, tuple]:
        if pos < len(args):
            return args[:pos] + (value,) + args[pos + 1 :], kwargs
        k = pos - len(args)
        return args, kwargs[:k] + ((kwargs[k][0], value),) + kwargs[k + 1 :]

    singles = [
        (i, *with_value(s, pos, v, s.args, s.kwargs))
        for i, s in enumerate(seeds)
        for pos, values in enumerate(options[i])
        for v in values
    ]
    rng.shuffle(singles)  # so that a budget smaller than the singles still covers every seed and argument
    for i, a, k in singles:
        add(i, a, k)
    attempts = 0
    while len(out) < n and attempts < 5 * n and seeds:
        attempts += 1
        i = rng.randrange(len(seeds))
        s = seeds[i]
        width = len(s.args) + len(s.kwargs)
        if width == 0:
            continue
        if width > 1 and rng.random() < 0.5:  # recombine with another seed's argument of the same type
            other = seeds[rng.randrange(len(seeds))]
            pos = rng.randrange(min(len(s.args), len(other.args))) if s.args and other.args else None
            if pos is not None and _type_shape(s.args[pos]) == _type_shape(other.args[pos]):
                add(i, *with_value(s, pos, other.args[pos], s.args, s.kwargs))
                continue
        args, kwargs = s.args, s.kwargs
        for pos in rng.sample(range(width), min(width, rng.choice((1, 2)))):
            if options[i][pos]:
                args, kwargs = with_value(s, pos, rng.choice(options[i][pos]), args, kwargs)
        add(i, args, kwargs)
    return out
