"""Decisions with foresight (issue 38): what a job's load will do, what a plan costs, and the best plan
in hindsight; plain values and arithmetic, below the stages that use them."""
