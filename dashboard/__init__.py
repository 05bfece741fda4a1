"""The Streamlit dashboard of footprint: a thin view over ``footprint.assess`` and ``footprint.lca.database``.

Start it with ``footprint dashboard`` or ``streamlit run dashboard/app.py``. ``dashboard.core`` holds
the parts that need no Streamlit session (reading inputs, building what-if overrides, tables), the
``page_*`` modules draw one page each.
"""
