"""Benchmarks of the engine: ``sandbox`` runs generated programs apart from us, ``quality`` measures
how well fills pass HumanEval-Infilling. Benchmarks are not tests; they are run by ``infill bench``.
"""
