"""A synthetic chat log full of long identifiers, for the long-thread benchmark.

Real logs of other communities (a blockchain project's Discord, a language's IRC channel)
are not on this machine, so this writes a seeded, deterministic stand-in in the format of
the #ubuntu corpus (``data/train/<name>.raw.txt``, ``[HH:MM] <nick> text``), which
``bench.long_thread --corpus DIR --night-end NAME`` reads as it reads the real one:

* transaction hashes (``0x`` + 64 hex), block numbers, addresses, commit hashes;
* long URLs (explorers, pull requests, CI runs), paths with several dots
  (``build/x.tar.gz``, ``var/log/Xorg.0.log``), versions with build metadata;
* namespaced and macOS-style names, issue and ticket references;
* speakers with brackets and bridge suffixes (``[DEV] alice``, ``bob[m]``);
* identifiers mentioned again later, and questions addressed to a bot.

Two profiles (``--profile``): ``dense`` (the default) puts identifiers in over half of
the messages, far denser than any real log seen; ``discord`` is calibrated to the issue's
Discord channel of a blockchain project: about 600 distinct identifiers in the most recent
fifth of a night's compacted turns, most of them long (64-hex transaction ids, explorer
and pull-request URLs, 40-hex hashes), in a channel that is mostly chatter.

Usage: ``python -m bench.synthetic_chat OUT_DIR [--profile dense|discord] [--excerpts N]
[--lines N] [--seed S]``; prints the excerpt the night should end with.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

NICKS = (
    "[DEV] alice",
    "bob[m]",
    "carol",
    "dave_eth",
    "[mod] erin",
    "frank[m]",
    "grace",
    "heidi-ops",
    "ivan",
    "judy[m]",
    "mallory",
    "[core] niaj",
    "oscar",
    "peggy",
    "rupert[m]",
    "sybil",
)
CHATTER = (
    "anyone else seeing this since the upgrade",
    "that fixed it for me, thanks",
    "I think the node is still syncing",
    "lol same here",
    "can confirm on my machine",
    "give it a few minutes and retry",
    "the docs are out of date on that point",
    "did you restart the service after that",
    "works now",
    "no idea, never touched that part",
)
QUESTIONS = (
    "why does the indexer stall after block {block} on {version}?",
    "can someone explain what {tx} did to the pool balance?",
    "where is the config for {path} documented, anyone know?",
    "is {url} the right place to report the regression in {version}?",
)


@dataclass(frozen=True, slots=True)
class Profile:
    """How often messages carry identifiers, and which kinds."""

    chatter_below: float
    """A message is chatter when its roll is below this."""
    question_below: float
    """...a question (with one identifier) below this..."""
    single_below: float
    """...one identifier below this, else two to four."""
    kind_weights: tuple[int, ...] | None
    """Weights of the twelve kinds of :meth:`Identifiers.fresh`; ``None``: uniform."""


PROFILES = {
    "dense": Profile(0.45, 0.55, 0.85, None),
    # ~5 % of messages name something; 12 of 19 draws are long (64-hex ids, explorer,
    # pull-request and CI URLs, 40-hex hashes).
    "discord": Profile(0.945, 0.953, 0.988, (4, 3, 2, 1, 1, 1, 1, 1, 2, 1, 1, 1)),
}


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


class Identifiers:
    """Draws identifiers of every kind; some are drawn again later (references back)."""

    def __init__(self, rng: random.Random, weights: tuple[int, ...] | None = None) -> None:
        self.rng = rng
        self.weights = weights
        self.seen: list[str] = []

    def fresh(self) -> str:
        rng = self.rng
        weights = self.weights
        kind = rng.randrange(12) if weights is None else rng.choices(range(12), weights)[0]
        if kind == 0:
            value = "0x" + _hex(rng, 64)
        elif kind == 1:
            value = "https://etherscan.io/tx/0x" + _hex(rng, 64)
        elif kind == 2:
            pull, comment = rng.randrange(1000, 99999), rng.randrange(10**8, 10**9)
            value = f"https://github.com/chainproj/node/pull/{pull}#issuecomment-{comment}"
        elif kind == 3:
            job = rng.randrange(10**6, 10**7)
            value = (
                f"https://ci.example.org/chainproj/node/-/jobs/{job}"
                f"/artifacts/file/build/logs/test-{_hex(rng, 8)}.log"
            )
        elif kind == 4:
            value = rng.choice(
                (
                    f"build/node-{rng.randrange(1, 9)}.{rng.randrange(20)}.{rng.randrange(9)}"
                    ".tar.gz",
                    f"var/log/Xorg.{rng.randrange(3)}.log",
                    f"/etc/chainproj/conf.d/{_hex(rng, 6)}.node.toml",
                    f"~/.config/chainproj/keystore.{rng.randrange(10)}.json",
                )
            )
        elif kind == 5:
            value = f"{rng.randrange(1, 4)}.{rng.randrange(30)}.{rng.randrange(12)}+{_hex(rng, 9)}"
        elif kind == 6:
            major, minor, patch = rng.randrange(1, 3), rng.randrange(20), rng.randrange(9)
            value = f"v{major}.{minor}.{patch}-rc.{rng.randrange(1, 5)}"
        elif kind == 7:
            value = "0x" + _hex(rng, 8)
        elif kind == 8:
            value = _hex(rng, 40)
        elif kind == 9:
            value = (
                rng.choice(("clojure.core/split-with", "clojure.string/join", "cats.core/mlet"))
                if rng.random() < 0.3
                else f"chain.rpc/get-block-{_hex(rng, 4)}"
            )
        elif kind == 10:
            value = f"NODE-{rng.randrange(100, 9999)}"
        else:
            value = f"chainproj/node#{rng.randrange(100, 20000)}"
        self.seen.append(value)
        return value

    def any(self) -> str:
        """A fresh identifier, or (one time in five) one mentioned before."""
        if self.seen and self.rng.random() < 0.2:
            return self.rng.choice(self.seen[-2000:])
        return self.fresh()


def line(rng: random.Random, ids: Identifiers, profile: Profile) -> str:
    """One message's text."""
    roll = rng.random()
    if roll < profile.chatter_below:
        return rng.choice(CHATTER)
    if roll < profile.question_below:
        return rng.choice(QUESTIONS).format(
            block=rng.randrange(10**7, 2 * 10**7),
            version=f"{rng.randrange(1, 4)}.{rng.randrange(30)}.{rng.randrange(12)}+{_hex(rng, 9)}",
            tx="0x" + _hex(rng, 64),
            path=f"build/node-{rng.randrange(9)}.{rng.randrange(9)}.tar.gz",
            url=f"https://github.com/chainproj/node/issues/{rng.randrange(100, 9999)}",
        )
    count = 1 if roll < profile.single_below else 2 + rng.randrange(3)
    values = " and ".join(ids.any() for _ in range(count))
    return rng.choice(
        (
            f"see {values}",
            f"it failed at {values}, no idea why",
            f"try {values} instead",
            f"macOS users: check {values}",
            f"{values} is the one I meant",
        )
    )


def write(out: Path, *, excerpts: int, lines: int, seed: int, profile: Profile) -> str:
    """Write the corpus under ``out``; returns the name of the last excerpt."""
    rng = random.Random(seed)
    ids = Identifiers(rng, profile.kind_weights)
    folder = out / "data" / "train"
    folder.mkdir(parents=True, exist_ok=True)
    name = ""
    for number in range(excerpts):
        name = f"2030-01-{number // 24 + 1:02d}.synthetic-{number:03d}"
        rows = []
        for k in range(lines):
            minute = k * 1440 // lines
            nick = rng.choice(NICKS)
            rows.append(
                f"[{minute // 60:02d}:{minute % 60:02d}] <{nick}> {line(rng, ids, profile)}"
            )
        (folder / f"{name}.raw.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="dense")
    parser.add_argument("--excerpts", type=int, default=40)
    parser.add_argument("--lines", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    # The night ends one excerpt before the last, so the morning has questions left.
    names = write(
        args.out,
        excerpts=args.excerpts,
        lines=args.lines,
        seed=args.seed,
        profile=PROFILES[args.profile],
    )
    number = int(names.rsplit("-", 1)[1]) - 1
    print(f"2030-01-{number // 24 + 1:02d}.synthetic-{number:03d}")


if __name__ == "__main__":
    main()
