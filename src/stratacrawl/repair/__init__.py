"""Repairing a source's extraction rules after its site changed layout: pairs of a page in
the new layout and the values its item's record held before, rules learned from them
(``clean/learn.py``) and checked on pairs held back, as a proposal."""
