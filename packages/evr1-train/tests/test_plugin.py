"""The `verl.plugins` entry point registers evr1's pieces during `import verl` in a fresh process (as in Ray workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytestmark = pytest.mark.verl


def test_entry_point_is_declared() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group="verl.plugins")}
    assert eps.get("evr1") == "evr1_train.verl_hooks.plugin"


def test_import_verl_registers_everything_in_a_fresh_process() -> None:
    code = (
        "import json, verl\n"
        "from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY\n"
        "import verl.models.transformers.qwen2_vl as qv\n"
        "from verl.workers.engine.fsdp.transformer_impl import FSDPEngine\n"
        "print(json.dumps({'loss': 'evr1_hybrid' in POLICY_LOSS_REGISTRY,"
        " 'agent': _agent_loop_registry.get('evr1_hybrid'), 'trainer': 'evr1' in TRAINER_REGISTRY,"
        " 'compat': getattr(qv._get_input_embeds, '__evr1_compat__', False),"
        " 'freeze': getattr(FSDPEngine._build_module, '__evr1_freeze__', False)}))\n"
    )
    # as in a Ray worker of a run with evr1.frozen_modules (prepare_verl_config puts this into the runtime env)
    env = {**os.environ, "EVR1_FROZEN_MODULES": '["vision_tower", "merger"]'}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True, env=env)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "loss": True,
        "agent": {"_target_": "evr1_train.verl_hooks.agent_loop.Evr1HybridAgentLoop"},
        "trainer": True,
        "compat": True,
        "freeze": True,
    }


def test_registration_holds_when_the_dataset_imports_verl_first() -> None:
    """`import verl` runs the plugin; when evr1's dataset module is what imports verl (a script that imports
    `Evr1Dataset` first), the plugin must not need that half-imported module (it did, for the offline-text field name,
    so both agent loops and the trainer went unregistered in that process)."""
    code = (
        "import json, logging, evr1_train.data.dataset\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "from evr1_train.verl_hooks.plugin import REGISTERED\n"
        "print(json.dumps({'agents': sorted(k for k in _agent_loop_registry if k.startswith('evr1')),"
        " 'registered': sorted(REGISTERED)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert "evr1 plugin:" not in out.stderr, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["agents"] == ["evr1_agent", "evr1_hybrid"]
    assert {"agent_loop:evr1_hybrid", "agent_loop:evr1_agent", "policy_loss:evr1_hybrid"} <= set(got["registered"])
