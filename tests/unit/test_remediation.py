import json

from rdmaprov.remediation import ALL, Remedy


def test_values_are_stable_strings():
    assert ALL == ("config", "replace", "reset-link", "reboot", "firmware", "investigate")
    assert f"{Remedy.RESET_LINK}" == "reset-link"
    assert json.dumps({"r": Remedy.REPLACE}) == '{"r": "replace"}'
    assert Remedy("config") is Remedy.CONFIG
