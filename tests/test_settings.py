"""Each lesson's block of a profile is typed: read as attributes or like a dict, a misspelt name is an error."""
import pytest

import nbsupport as nbs
from nbsupport.profiles import CompareSettings, CurseSettings, IBMSettings, MixtureSettings, MultiSourceSettings


@pytest.mark.parametrize("name", ["ci", "lab", "full"])
def test_every_profile_holds_typed_blocks(name):
    p = nbs.profile(name)
    for block, kind in [("curse", CurseSettings), ("multi_source", MultiSourceSettings), ("ibm", IBMSettings),
                        ("mixture", MixtureSettings), ("compare", CompareSettings)]:
        settings = getattr(p, block)
        assert type(settings) is kind, (name, block)
        assert all(settings[k] == getattr(settings, k) for k in settings)          # both ways read the same
        assert dict(**settings) == dict(settings.items())


def test_optional_settings_left_at_none_are_absent_and_a_misspelt_one_is_named():
    ci, lab = nbs.profile("ci"), nbs.profile("lab")
    assert "model" not in ci.compare and ci.compare.get("model") is None and lab.compare.model["d_model"] == 64
    assert lab.ibm["nmt_train"] == 5000 and nbs.profile("full").curse["bible_epochs"] == 4
    assert lab.curse.bible_epochs is None and "bible_epochs" not in lab.curse                 # None: absent
    with pytest.raises(KeyError, match="no setting 'test_sentence'; its settings: styles, toy_train"):
        lab.mixture["test_sentence"]
    with pytest.raises(TypeError):
        MixtureSettings(styles=3, toy_train=10, training={}, test_sentences=5, seeds=(0,), dropouts=(0.1,),
                        flip_sentences=4, table1_losses=("hMup",), test_sentence=5)
