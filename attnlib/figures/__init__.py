"""The course's figures: one style and the pictures of its ideas (not core API).

=====================  ===================================================================
module                 what it holds
=====================  ===================================================================
``plotting``           the figure style (:func:`~attnlib.figures.plotting.use_course_style`),
                       attention heat maps and mask grids
``diagrams``           the ideas' pictures, chapters 01-10
``diagrams_text``      chapter 12's pictures (an induction head, the three model families)
``diagrams_vit``       chapter 11's whole-model picture
``_draw``              the palette, canvas, boxes and arrows the diagram modules share (private)
=====================  ===================================================================

The core (the modules at the top of :mod:`attnlib`) never imports this package; the chapters
import ``attnlib.figures.plotting`` and the diagram modules directly. matplotlib is imported
inside the functions that draw, so importing a module here costs nothing without it.
"""
