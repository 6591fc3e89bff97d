"""Memory: activation memory of a run directory against the analytical model of Korthikanti et al. 2022
(activation_run.py, the ``activation_memory`` analyzer; the model in activation_model.py, the per-tensor bill of
materials in bill_of_materials.py, the comparison in activation_compare.py), and the memory timeline of the
``[memory]`` events per device (timeline.py, the ``memory_timeline`` analyzer; torch's raw export in
timeline_export.py)."""
