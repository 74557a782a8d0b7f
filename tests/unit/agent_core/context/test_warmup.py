"""The startup warm-up leaves nothing for a compaction to compile."""

from itertools import product

from agent_core.context import identifiers, secret_rules
from agent_core.context.warmup import warm_compressor

PIECES = ("see", "https://x.io/a", "www.x.org", "a@b.io", "PROJ-12", "#7", "src/a.py", "C:\\x\\y")


def test_after_warm_up_no_text_needs_a_new_pattern() -> None:
    warm_compressor()
    patterns = identifiers._pattern.cache_info().currsize
    rules = secret_rules.rule_set.cache_info().currsize
    for chosen in product((False, True), repeat=len(PIECES)):
        text = " ".join(piece for piece, keep in zip(PIECES, chosen, strict=True) if keep)
        identifiers.find_identifiers(text)
    secret_rules.find_secrets(["token ghp_" + "a1" * 18])
    assert identifiers._pattern.cache_info().currsize == patterns
    assert secret_rules.rule_set.cache_info().currsize == rules == 1
