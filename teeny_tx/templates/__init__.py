"""Jinja2 templates (*.cu.j2) and the emitter that renders the IR through them."""
