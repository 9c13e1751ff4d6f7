"""Thin adapters that translate each RL framework's reward call convention; they never change scores."""
