"""`burnside conformance`: every burn layer, loss and optimizer with a PyTorch twin, trained on the same
weights and data as its twin and judged with the float64 referee, exactly as a user's port is."""

from burnside.conformance.case import Case, Hypothesis
from burnside.conformance.cases import all_cases
from burnside.conformance.suite import CaseResult, run_case, run_suite, select, summary

__all__ = ["Case", "CaseResult", "Hypothesis", "all_cases", "run_case", "run_suite", "select", "summary"]
