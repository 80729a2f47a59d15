"""Output formats: the JSON contract, SARIF 2.1.0, GitHub workflow commands, text."""

from __future__ import annotations

import json

import jsonschema

from tests.unit.check.conftest import FIXTURES, check

# A subset of the SARIF 2.1.0 schema (https://docs.oasis-open.org/sarif/sarif/v2.1.0/) written from
# the specification's required properties: the full schema cannot be downloaded in tests. It checks
# version, runs[].tool.driver.name/rules, results[].ruleId/level/message.text and
# locations[].physicalLocation.artifactLocation.uri/region.startLine.
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string", "minLength": 1},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription"],
                                            "properties": {
                                                "id": {"type": "string"},
                                                "shortDescription": {"type": "object", "required": ["text"]},
                                                "defaultConfiguration": {
                                                    "type": "object",
                                                    "properties": {"level": {"enum": ["none", "note", "warning", "error"]}},
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "level", "message"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation", "region"],
                                                "properties": {
                                                    "artifactLocation": {"type": "object", "required": ["uri"], "properties": {"uri": {"type": "string", "minLength": 1}}},
                                                    "region": {"type": "object", "required": ["startLine"], "properties": {"startLine": {"type": "integer", "minimum": 1}}},
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_json_contract():
    rep = check(path=FIXTURES / "long_context.sh", gpu="A100-80GB")
    d = json.loads(json.dumps(rep.to_dict(), default=str))
    assert {"findings", "fixed_command", "plan"} <= set(d)
    sev = [f["severity"] for f in d["findings"]]
    assert sev == sorted(sev, key=["error", "warning", "info"].index)  # errors first
    for f in d["findings"]:
        assert set(f) >= {"rule", "severity", "title", "message", "flags", "location", "fix"}
        assert set(f["location"]) == {"file", "line"}
        for e in f["fix"]:
            assert set(e) == {"flag", "value"}
    removed = next(f for f in d["findings"] if f["rule"] == "OG602")
    assert removed["fix"] == [{"flag": "--swap-space", "value": None}]
    assert removed["location"] == {"file": str(FIXTURES / "long_context.sh"), "line": 14}
    assert d["fixed_command"] == rep.fix.text and "--swap-space" not in d["fixed_command"]
    assert d["plan"]["schema_version"] >= 1 and "per_gpu" in d["plan"]
    assert d["fixed_check"]["errors"] == [] and d["fixed_check"]["starts"] is True


def test_json_fixed_command_null_when_clean():
    d = check(path=FIXTURES / "clean_h100.sh", gpu="H100").to_dict()
    assert d["findings"] == [] and d["fixed_command"] is None and d["plan"]["starts"] is True


def test_json_plan_null_without_model():
    d = check("vllm serve /no/such/dir --swap-space 4", gpu="A100-80GB").to_dict()
    assert d["plan"] is None and d["findings"][0]["rule"] == "OG602"


def test_sarif_validates_against_the_2_1_0_subset():
    from oomguard.check.registry import all_rules
    from oomguard.check.sarif import to_sarif

    rep = check(path=FIXTURES / "long_context.sh", gpu="A100-80GB")
    doc = json.loads(json.dumps(to_sarif(rep), default=str))
    jsonschema.validate(doc, SARIF_SUBSET)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert len(rules) == len(all_rules())
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["OG602"] == "error" and levels["OG604"] == "warning" and levels["OG204"] == "note"
    loc = next(r for r in run["results"] if r["ruleId"] == "OG602")["locations"][0]["physicalLocation"]
    assert loc["region"]["startLine"] == 14 and loc["artifactLocation"]["uri"].endswith("long_context.sh")


def test_sarif_command_results_have_no_location():
    from oomguard.check.sarif import to_sarif

    doc = to_sarif(check("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --swap-space 4", gpu="A100-80GB"))
    jsonschema.validate(json.loads(json.dumps(doc, default=str)), SARIF_SUBSET)
    assert "locations" not in doc["runs"][0]["results"][0]


def test_github_annotations_are_escaped():
    from oomguard.check.finding import Finding, Severity
    from oomguard.check.github import escape_property, to_github

    rep = check(path=FIXTURES / "long_context.sh", gpu="A100-80GB")
    lines = to_github(rep).splitlines()
    assert len(lines) == len(rep.findings)
    assert lines[0].startswith("::error file=") and ",line=" in lines[0] and ",title=OG6" in lines[0]
    assert any(x.startswith("::notice ") for x in lines)
    assert all("\n" not in x for x in lines)
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"
    rep.result.findings = [Finding("OG101", Severity.WARNING, "t", "line one\nline two: 50%", name="n")]
    assert to_github(rep) == "::warning title=OG101 n::line one%0Aline two: 50%25\n"


def test_text_report_shows_findings_fix_and_diff():
    from oomguard.check.text import render_report

    rep = check(path=FIXTURES / "long_context.sh", gpu="A100-80GB")
    out = render_report(rep)
    assert f"{FIXTURES / 'long_context.sh'}:14: error OG602 removed-flag" in out
    assert "fix: remove --swap-space" in out
    assert "+++ " + str(FIXTURES / "long_context.fixed.sh") in out
    assert "the corrected launch passes oomguard check and is predicted to start." in out
    assert "2 error(s), 2 warning(s)" in out
