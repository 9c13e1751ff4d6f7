"""Hydra configs of evr1-train (primary: evr1_trainer.yaml; groups: engine, evr1_model, evr1_algo, evr1_hybrid, experiment)."""
