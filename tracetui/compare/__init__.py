"""Two or more traces: alignment, diff, the reasons for each change, ladders. Imports read/ and model/."""
