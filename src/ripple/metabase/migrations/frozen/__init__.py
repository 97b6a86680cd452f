"""What migration steps share, frozen as it was when the first step to use it was written.

A module here is never edited, as a step is never edited: a step that needs something to
work otherwise gets a module of its own, named for its revision. Nothing here imports from
the rest of ripple, whose schemas and code move on.
"""
