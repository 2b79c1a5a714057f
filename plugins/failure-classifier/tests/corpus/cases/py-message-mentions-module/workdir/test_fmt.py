from fmt import explain


def test_explain():
    assert explain("yaml") == "ModuleNotFoundError: No module named 'yaml' (pip install pyyaml)"
