"""Python's language hooks (infill/syntax/hooks.py): what the general code asks Python.

- block structure and what may end a fill: the offside rule and CPython's line checks
  (infill/lang/python/offside.py), fed by Python's part of a hole's context (infill/lang/python/blocks.py);
- shapes and scaffolds: stand-in fills (infill/lang/python/shape.py), nested headers filled as
  holes of their own (infill/lang/python/scaffold.py);
- judging: a fill in a method of a class is judged in that method (``nested_region``; found by
  the offside rule where the tree is one ERROR around it), and CPython's compiler judges too
  (infill/lang/python/pycompile.py).
"""

from __future__ import annotations

import msgspec

from infill.lang.python import blocks, scaffold as scaffolds, shape as shapes
from infill.lang.python.offside import OffsideRules
from infill.lang.python.pycompile import StrictCheck
from infill.protocol import FillRequest, FillResult
from infill.syntax.hooks import LanguageHooks

HEAD_TOKENS = 32  # the window of a retry's fill that is a block header's head alone


class PythonHooks(LanguageHooks):
    """Python's hooks: the offside rule, shapes, scaffolds, method regions and CPython's compiler."""

    name = "python"

    # -- block structure: steering ---------------------------------------------------------------

    def hole_context(self, doc, i, base, opened):
        return blocks.hole_context(doc, i, base, opened)

    def line_rules(self, ctx, closers):
        return OffsideRules(ctx, closers)

    # -- shapes --------------------------------------------------------------------------------

    def no_shape(self) -> shapes.Shape:
        return shapes.Shape()

    def shape_of(self, request: FillRequest) -> shapes.Shape:
        return shapes.shape_of(request)

    def first_round(self, shape):
        return shapes.first_round_shape(shape)

    def strict(self, shape):
        return shapes.strict_shape(shape)

    def head_window(self, shape) -> int | None:
        """A fill that is a header's head alone (``head_only``) gets a window of at most
        HEAD_TOKENS (one line: a longer window only gives a model caught in a loop room to run on)."""
        return HEAD_TOKENS if shape.head_only else None

    def lead_widths(self, shape, n_holes: int) -> list[int | None]:
        """The last hole's one first-line width, and each scaffold line's (a small model's
        likeliest first tokens are often not that indentation)."""
        widths: list[int | None] = [None] * n_holes
        if shape.first_indents and len(shape.first_indents) == 1:
            widths[-1] = shape.first_indents[0]
        for line in shape.scaffold_holes:
            widths[line.hole] = line.width if line.width is not None else widths[line.hole]
        return widths

    def steering_context(self, doc, i, ctx, shape):
        """The last hole's context with its shape's opener, widths and levels (:func:`shape.before_opener`);
        a scaffolded request's hole with what the scaffold tells of it (:func:`shape.scaffold_context`)."""
        if i == len(doc.holes) - 1:
            ctx = shapes.before_opener(ctx, shape)
        lines = {s.hole: s for s in shape.scaffold_holes}
        if i in lines:
            ctx = shapes.scaffold_context(ctx, lines[i], doc.region_text(i)[0].rsplit("\n", 1)[-1])
        return ctx

    # -- scaffolds -----------------------------------------------------------------------------

    def scaffold(self, request, shape):
        if not shape.scaffold or not scaffolds.fits(request, shape):
            return None
        return scaffolds.split(request, shape)

    def join_scaffold(self, request: FillRequest, scaffolded: FillRequest, result: FillResult) -> FillResult:
        """The scaffold's join (infill/lang/python/scaffold.py); where it is invalid, the scaffold's
        lines without the free lines before them, if that is valid (a cut back of the free lines
        to nothing)."""
        from infill.syntax.constraint import is_valid  # the constraint module imports torch: only when a scaffold joins

        joined = scaffolds.join(request, scaffolded, result)
        if joined.fills[0].valid is False:
            bare = scaffolds.join(request, scaffolded, result, free=False)
            h = request.holes[0]
            if is_valid(request.language, request.text, [(h.start, h.end)], [bare.fills[0].text]):
                joined = msgspec.structs.replace(bare, fills=[msgspec.structs.replace(bare.fills[0], valid=True)])
        return joined

    # -- judging -------------------------------------------------------------------------------

    def nested_region(self, root, data, spans):
        return blocks.nested_region(root, data, spans)

    def region_end(self, data, start, end):
        return blocks.region_end(data, start, end)

    def strict_check(self, region, spans):
        return StrictCheck(region, spans)


HOOKS = PythonHooks()
