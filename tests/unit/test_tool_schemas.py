"""The tools' schemas are part of every request's cached prefix (bench_agent's cache figures depend on it):
a change to a name, a description or a parameter must be deliberate. The fixture holds them as they were
written when the tool-call path was restructured; regenerate it only for a change meant to reach the model:

    .venv/bin/python -c "import json; from workstation.agent import tools; \
print(json.dumps(tools.schemas(), ensure_ascii=False, indent=1))" > tests/fixtures/tools/schemas.json
"""

import json
from pathlib import Path

from workstation.agent import tools

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tools" / "schemas.json"


def test_the_schemas_the_model_sees_are_unchanged():
    assert json.dumps(tools.schemas(), ensure_ascii=False, indent=1) + "\n" == FIXTURE.read_text("utf-8")


def test_a_toolset_offers_them_in_the_same_order_and_bytes():
    # what the loop sends (Toolset.schemas) serialises to the same bytes as the registry's declaration
    assert json.dumps(tools.Toolset().schemas()) == json.dumps(tools.schemas())
