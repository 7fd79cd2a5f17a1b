"""Which pretraining-stage objectives train the throwaway dense heads (ltopd.twins.dense_vision).

Named apart from ltopd.twins.pretrain, which registers the objectives themselves
(``STAGE_OBJECTIVES``), so that profile validation (ltopd.config) reads them without importing
torch.
"""

DENSE_OBJECTIVES = ("dense", "words")
