"""Token-aware truncation: the model's tokenizer when given, a script-aware budget otherwise."""

from __future__ import annotations

import json

import pytest
from clirkit import InvalidInputError
from clirkit.encoders import truncate_text
from conftest import shared_path

tokenizers = pytest.importorskip("tokenizers")


def paragraphs(lang: str, count: int = 5) -> list[str]:
    lines = shared_path("data", "xquad-pos", "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if json.loads(line).get("lang") == lang]
    return texts[:count]


@pytest.fixture(scope="module")
def e5_tokenizer():
    return tokenizers.Tokenizer.from_file(
        str(shared_path("models", "multilingual-e5-small-int8", "tokenizer.json"))
    )


@pytest.mark.parametrize("lang", ["zh", "th", "en", "ar"])
@pytest.mark.parametrize("budget", [16, 64])
def test_tokenizer_truncation_meets_the_budget(e5_tokenizer, lang, budget):
    long_texts = [
        t for t in paragraphs(lang, 20) if len(e5_tokenizer.encode(t, add_special_tokens=False).ids) > budget
    ]
    assert len(long_texts) >= 5
    for text in long_texts:
        cut = truncate_text(text, budget, e5_tokenizer)
        assert text.startswith(cut)
        tokens = len(e5_tokenizer.encode(cut, add_special_tokens=False).ids)
        assert budget - 3 <= tokens <= budget, (lang, tokens)
    assert e5_tokenizer.truncation is not None  # the caller's tokenizer is left as it was


def test_a_budget_beyond_the_tokenizers_own_truncation_counts_every_token(e5_tokenizer):
    text = "word " * 600
    cut = truncate_text(text, 550, e5_tokenizer)  # e5's tokenizer.json truncates at 512
    assert cut == ("word " * 550).rstrip()


def test_text_within_budget_comes_back_whole(e5_tokenizer):
    assert truncate_text("短い文", 10, e5_tokenizer) == "短い文"
    assert truncate_text("two words", 2) == "two words"
    assert truncate_text("anything", 0, e5_tokenizer) == ""
    with pytest.raises(InvalidInputError, match="max_tokens"):
        truncate_text("x", -1)


@pytest.mark.parametrize("lang", ["zh", "th"])
def test_fallback_cuts_unspaced_scripts_by_character(lang, e5_tokenizer):
    for text in [t for t in paragraphs(lang, 20) if len(t) > 100]:
        cut = truncate_text(text, 64)
        assert text.startswith(cut) and len(cut) < len(text)
        # 64 units: characters of the script, plus a few Latin words and digit runs (one unit each).
        assert 64 <= len("".join(cut.split())) <= 110
        # Near the tokenizer's budget: about one e5 token per character, more for Latin names inside.
        assert len(e5_tokenizer.encode(cut, add_special_tokens=False).ids) <= 96


def test_fallback_counts_words_in_spaced_scripts():
    assert truncate_text("Der Hund bellt laut im Garten", 3) == "Der Hund bellt"
    assert truncate_text("كم نقطة تخلى عنها دفاع", 2) == "كم نقطة"
    assert truncate_text("Ein 超级碗 test", 3) == "Ein 超级"


def test_a_tokenizer_that_pads_is_cut_by_its_real_tokens(e5_tokenizer):
    """A tokenizer.json asking for padding (all-MiniLM's pads to 128) gives padding offsets too: they are
    not tokens of the text, so the cut is the unpadded tokenizer's (counting them never ended)."""
    padded = tokenizers.Tokenizer.from_str(e5_tokenizer.to_str())
    padded.enable_padding(length=128)
    text = "黑豹队的防守只丢了 308分，在联赛中排名第六"
    assert truncate_text(text, 5, padded) == truncate_text(text, 5, e5_tokenizer) != text
    assert truncate_text("短い文", 10, padded) == "短い文"
