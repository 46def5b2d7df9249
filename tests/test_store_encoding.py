import warnings

import numpy as np
import pytest

from lib.common.paths import RecoveryWarning
from lib.embed.encoder import load_model, model_id_of
from lib.embed.store import EmbeddingStore, embed_titles, encoding_of


@pytest.fixture(scope="module")
def minilm():
    return load_model()


def test_a_store_filled_with_another_encoding_is_set_aside_and_encoded_again(tmp_path, minilm):
    titles = ["Dnieper", "Kyiv", "Black Sea", "Ukraine", "Danube"]
    mid = model_id_of(minilm)
    fresh = EmbeddingStore(tmp_path / "fresh", mid)
    embed_titles(titles, minilm, fresh, batch_size=4, progress=False)
    want = fresh.get(titles)

    old = EmbeddingStore(tmp_path / "old", mid)
    old.append(titles[:3], want[:3] + 1e-3)  # an older store: vectors a bit off, no encoding recorded
    with pytest.warns(
        RecoveryWarning,
        match=r"1 chunk\(s\) hold vectors encoded as not recorded \(an older store\), "
        r"not fixed-shape batches of 4 on cpu",
    ):
        stats = embed_titles(titles, minilm, old, batch_size=4, progress=False)
    assert stats["newly_encoded"] == 5 and np.array_equal(old.get(titles), want)
    assert len(list((tmp_path / "old" / "chunks").glob("*.other-encoding"))) == 1
    reopened = EmbeddingStore(tmp_path / "old", mid)
    assert np.array_equal(reopened.get(titles), want)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RecoveryWarning)  # the same encoding again: nothing set aside
        assert embed_titles(titles, minilm, reopened, batch_size=4, progress=False)["newly_encoded"] == 0
    with pytest.warns(RecoveryWarning, match="fixed-shape batches of 4 on cpu, not fixed-shape batches of 8 on cpu"):
        assert embed_titles(titles, minilm, reopened, batch_size=8, progress=False)["newly_encoded"] == 5
    assert encoding_of(minilm, "plain", 8) == "plain batches of 8 on cpu"
