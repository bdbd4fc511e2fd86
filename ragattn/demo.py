"""A small built-in example for ``ragattn demo`` and the web page: one question, six passages."""

from __future__ import annotations

from ragattn.types import Document

QUERY = "When was the Eiffel Tower completed and who designed it?"

DOCUMENTS: tuple[Document, ...] = (
    Document(
        id="bananas",
        title="Banana",
        text="Bananas are rich in potassium. They grow in tropical climates and are harvested "
        "green. Most exported bananas are of the Cavendish variety.",
    ),
    Document(
        id="eiffel",
        title="Eiffel Tower",
        text="The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by the "
        "engineers Maurice Koechlin and Émile Nouguier of Gustave Eiffel's company. Construction "
        "began in 1887 and the tower was completed on 31 March 1889, in time for the World's Fair. "
        "It is 330 metres tall.",
    ),
    Document(
        id="louvre",
        title="Louvre",
        text="The Louvre is the world's most-visited art museum. It is located on the Right Bank "
        "of the Seine in Paris. The museum holds the Mona Lisa.",
    ),
    Document(
        id="statue",
        title="Statue of Liberty",
        text="The Statue of Liberty was a gift from France to the United States. Gustave Eiffel's "
        "company built its internal iron framework. It was dedicated on 28 October 1886.",
    ),
    Document(
        id="market",
        title="Markets",
        text="The stock market fell sharply on Monday. Analysts blamed rising interest rates. "
        "Bond yields climbed to a ten-year high.",
    ),
    Document(
        id="paris",
        title="Paris",
        text="Paris is the capital of France. The city hosted the Exposition Universelle of 1889, "
        "which marked the centennial of the French Revolution. Its most famous landmark is the "
        "Eiffel Tower.",
    ),
)
