"""Tests of the burn side: real cargo, real burn, real torch."""
