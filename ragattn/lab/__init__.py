"""The lab: training, head detection, evaluation, benchmarks and model cards (layer 5).

Everything that *fits*, *measures* or *writes* learned assets lives here: the sentence-probe and
rerank-fusion training, QRHead selection, retrieval-head detection, the lab registry of method
variants (``registry``), the evaluation harness over the shared data sets and the benchmarks.
scikit-learn, tqdm and the dataset loaders are imported here and only here; the runtime
(``ragattn.rerank``, ``ragattn.compress``, ...) never imports this package, so serving never loads
training code. Install its extras with ``pip install 'ragattn[lab,eval]'``.
"""

from __future__ import annotations
