"""The official code each benchmark's official protocol reproduces, by repository, file and commit.

lmms-eval's task files are cited at the 0.7.3 release (`pip install lmms-eval==0.7.3`, wheel sha256
5709f9f9f56a8f5f22bf379571bd1c5e7702af5ae2bbb9637001c5dd91168895): the `lmms_eval` nox session installs exactly that
release and compares these re-implementations with its real functions. The other references were read at the commits
given and are pinned case by case in the tests.
"""

from __future__ import annotations

from evr1_eval.types import Reference

LMMS_EVAL = "EvolvingLMMs-Lab/lmms-eval"
LMMS_EVAL_RELEASE = "v0.7.3"


def lmms_eval(task: str, file: str = "utils.py") -> Reference:
    """A task file of lmms-eval 0.7.3 (`lmms_eval/tasks/<task>/<file>`)."""
    return Reference(LMMS_EVAL, f"lmms_eval/tasks/{task}/{file}", LMMS_EVAL_RELEASE, "PyPI lmms-eval==0.7.3")


#: Video-MME's evaluation script, as linked from MME-Benchmarks/Video-MME's README (06c2315); the copy that used to
#: live in that repository (evaluation/eval_your_results.py@4e7566d) lacks the last four answer prefixes.
VIDEOMME = Reference(
    "thanku-all/parse_answer",
    "eval_your_results.py",
    "afd52cfe3dde5b3685e0d4f760c10c756860c758",
    "linked from MME-Benchmarks/Video-MME README@06c2315",
)
VSIBENCH = Reference(
    "vision-x-nyu/thinking-in-space", "lmms_eval/tasks/vsibench/utils.py", "51e089c3ae69b9435e9489058610f5b3964c56a8"
)
OVOBENCH = Reference(
    "JoeLeelyf/OVO-Bench",
    "utils/OVOBenchScore.py",
    "c34093f9a072d93f9e1c6b923446dfba71f4528e",
    "prompts: constant.py; lmms-eval 0.7.3 ships a copy in tasks/ovobench/score_utils/score.py",
)
TEMPCOMPASS = Reference(
    "llyx97/TempCompass",
    "eval_multi-choice.py, eval_yes_no.py, eval_caption_matching.py",
    "e1b463166400633e6061962d890a9ae85db29f70",
    "prompts: run_qwen2_vl.py; the same rules as lmms-eval 0.7.3 tasks/tempcompass/utils.py",
)
#: MLVU's own multiple-choice script (its M-Avg divides by the tasks present).
MLVU_OWN = Reference(
    "JUNJIE99/MLVU",
    "evaluation/multiple_choice_evaluation/choice_bench.py",
    "fd060c10a43ea48a35100a22688a927b8e531199",
)
