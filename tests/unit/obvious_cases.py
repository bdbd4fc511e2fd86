"""Obvious reranking cases: one relevant document among same-type distractors.

Each case is ``(query, relevant, distractors)``: the distractors share the relevant document's
type (another capital, another author, another year, another unit) and most of its words, so a
ranker that reads input position, length or word overlap alone gets them wrong. Written for
ragattn's tests; facts are common knowledge.
"""

from __future__ import annotations

CASES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "which city is the capital of France?",
        "Paris is the capital of France and its largest city.",
        (
            "Berlin is the capital of Germany.",
            "Lyon is a large city in France, known for its food.",
            "Madrid is the capital of Spain.",
        ),
    ),
    (
        "What is the capital of the United States?",
        "Washington, D.C. is the capital of the United States.",
        (
            "Carson City is the capital city of the American state of Nevada.",
            "Ottawa is the capital of Canada.",
            "New York City is the most populous city in the United States.",
        ),
    ),
    (
        "What is the capital of Japan?",
        "Tokyo is the capital of Japan.",
        (
            "Seoul is the capital of South Korea.",
            "Osaka is a major port city in Japan.",
            "Beijing is the capital of China.",
        ),
    ),
    (
        "What is the capital of Australia?",
        "Canberra is the capital city of Australia.",
        (
            "Sydney is the largest city in Australia.",
            "Wellington is the capital of New Zealand.",
            "Melbourne is the capital of the Australian state of Victoria.",
        ),
    ),
    (
        "What is the capital of Italy?",
        "Rome is the capital of Italy.",
        (
            "Milan is the financial centre of Italy.",
            "Vienna is the capital of Austria.",
            "Athens is the capital of Greece.",
        ),
    ),
    (
        "What is the capital of Canada?",
        "Ottawa is the capital of Canada.",
        (
            "Toronto is the largest city in Canada.",
            "Canberra is the capital of Australia.",
            "Mexico City is the capital of Mexico.",
        ),
    ),
    (
        "Who wrote Pride and Prejudice?",
        "Pride and Prejudice is a novel written by Jane Austen, published in 1813.",
        (
            "Jane Eyre is a novel written by Charlotte Bronte.",
            "Great Expectations is a novel by Charles Dickens.",
            "Wuthering Heights was written by Emily Bronte.",
        ),
    ),
    (
        "Who wrote the play Hamlet?",
        "Hamlet is a tragedy written by William Shakespeare.",
        (
            "Faust is a tragic play written by Johann Wolfgang von Goethe.",
            "Doctor Faustus is a play by Christopher Marlowe.",
            "Phedre is a tragedy by Jean Racine.",
        ),
    ),
    (
        "Who wrote the novel 1984?",
        "Nineteen Eighty-Four (1984) is a dystopian novel by George Orwell.",
        (
            "Brave New World is a dystopian novel by Aldous Huxley.",
            "Fahrenheit 451 is a dystopian novel by Ray Bradbury.",
            "We is a dystopian novel by Yevgeny Zamyatin.",
        ),
    ),
    (
        "Who wrote War and Peace?",
        "War and Peace is a novel by the Russian author Leo Tolstoy.",
        (
            "Crime and Punishment is a novel by Fyodor Dostoevsky.",
            "Dead Souls is a novel by Nikolai Gogol.",
            "Fathers and Sons is a novel by Ivan Turgenev.",
        ),
    ),
    (
        "Who painted the Mona Lisa?",
        "The Mona Lisa was painted by Leonardo da Vinci.",
        (
            "The Starry Night was painted by Vincent van Gogh.",
            "The Girl with a Pearl Earring was painted by Johannes Vermeer.",
            "The Birth of Venus was painted by Sandro Botticelli.",
        ),
    ),
    (
        "Who composed the Ninth Symphony with the Ode to Joy?",
        "Ludwig van Beethoven composed the Ninth Symphony, whose finale sets the Ode to Joy.",
        (
            "Wolfgang Amadeus Mozart composed The Magic Flute.",
            "Antonin Dvorak composed the New World Symphony.",
            "Gustav Mahler composed nine complete symphonies.",
        ),
    ),
    (
        "Who developed the theory of general relativity?",
        "Albert Einstein developed the theory of general relativity, published in 1915.",
        (
            "Isaac Newton formulated the laws of motion and universal gravitation.",
            "Niels Bohr developed a model of the atom.",
            "Max Planck originated quantum theory.",
        ),
    ),
    (
        "When did World War II end?",
        "World War II ended in 1945 with the surrender of Germany and Japan.",
        (
            "World War I ended in 1918 with the armistice of November 11.",
            "The Korean War fighting ended in 1953 with an armistice.",
            "The Vietnam War ended in 1975 with the fall of Saigon.",
        ),
    ),
    (
        "In which year did humans first land on the Moon?",
        "Apollo 11 landed the first humans on the Moon in 1969.",
        (
            "Sputnik 1, the first artificial satellite, was launched in 1957.",
            "Yuri Gagarin became the first human in space in 1961.",
            "The Space Shuttle first flew in 1981.",
        ),
    ),
    (
        "When did the Berlin Wall fall?",
        "The Berlin Wall fell on 9 November 1989.",
        (
            "The Berlin Wall was built in 1961.",
            "Germany was reunified on 3 October 1990.",
            "The Soviet Union was dissolved in December 1991.",
        ),
    ),
    (
        "When was the Declaration of Independence of the United States adopted?",
        "The Declaration of Independence was adopted by the Continental Congress on July 4, 1776.",
        (
            "The United States Constitution was signed on September 17, 1787.",
            "The Treaty of Paris ending the American Revolutionary War was signed in 1783.",
            "The Bill of Rights was ratified in 1791.",
        ),
    ),
    (
        "In what year did the Titanic sink?",
        "The Titanic sank in the North Atlantic in April 1912 after hitting an iceberg.",
        (
            "The Lusitania was sunk by a German submarine in 1915.",
            "The Titanic's sister ship Olympic entered service in 1911.",
            "The Andrea Doria sank in 1956 after a collision.",
        ),
    ),
    (
        "How many centimetres are in one metre?",
        "One metre is equal to 100 centimetres.",
        (
            "One kilometre is equal to 1,000 metres.",
            "One inch is equal to 2.54 centimetres.",
            "One foot is equal to 12 inches.",
        ),
    ),
    (
        "What is the boiling point of water in degrees Celsius at sea level?",
        "At sea level, water boils at 100 degrees Celsius.",
        (
            "Water freezes at 0 degrees Celsius.",
            "Ethanol boils at about 78 degrees Celsius.",
            "The normal human body temperature is about 37 degrees Celsius.",
        ),
    ),
    (
        "How many grams are in a kilogram?",
        "A kilogram is equal to 1,000 grams.",
        (
            "A pound is equal to about 454 grams.",
            "An ounce is equal to about 28 grams.",
            "A tonne is equal to 1,000 kilograms.",
        ),
    ),
    (
        "How many minutes are in an hour?",
        "An hour has 60 minutes.",
        (
            "A day has 24 hours.",
            "A week has 7 days.",
            "A minute has 60 seconds.",
        ),
    ),
    (
        "What is the speed of light in a vacuum?",
        "The speed of light in a vacuum is about 299,792 kilometres per second.",
        (
            "The speed of sound in air is about 343 metres per second.",
            "The Earth orbits the Sun at about 30 kilometres per second.",
            "A commercial jet cruises at about 900 kilometres per hour.",
        ),
    ),
    (
        "What is the chemical symbol for gold?",
        "The chemical symbol for gold is Au, from the Latin aurum.",
        (
            "The chemical symbol for silver is Ag.",
            "The chemical symbol for iron is Fe.",
            "The chemical symbol for lead is Pb.",
        ),
    ),
    (
        "Which planet is the largest in the Solar System?",
        "Jupiter is the largest planet in the Solar System.",
        (
            "Mercury is the smallest planet in the Solar System.",
            "Saturn is known for its prominent ring system.",
            "Mars is often called the Red Planet.",
        ),
    ),
    (
        "What is the longest river in South America?",
        "The Amazon is the longest river in South America.",
        (
            "The Nile is a major river in north-eastern Africa.",
            "The Mississippi is the main river of North America's largest drainage basin.",
            "The Parana is the second longest river in South America.",
        ),
    ),
    (
        "What is the tallest mountain on Earth?",
        "Mount Everest, at 8,849 metres, is the tallest mountain on Earth above sea level.",
        (
            "K2 is the second highest mountain on Earth.",
            "Mont Blanc is the highest mountain in the Alps.",
            "Denali is the highest mountain in North America.",
        ),
    ),
    (
        "Which ocean is the largest?",
        "The Pacific Ocean is the largest and deepest of the Earth's oceans.",
        (
            "The Atlantic Ocean is the second largest ocean.",
            "The Indian Ocean is the third largest ocean.",
            "The Arctic Ocean is the smallest ocean.",
        ),
    ),
    (
        "What language is mainly spoken in Brazil?",
        "Portuguese is the official and most widely spoken language of Brazil.",
        (
            "Spanish is the official language of Argentina.",
            "French is an official language of Canada.",
            "Dutch is the official language of Suriname.",
        ),
    ),
    (
        "What is the currency of Japan?",
        "The currency of Japan is the yen.",
        (
            "The currency of China is the renminbi, whose unit is the yuan.",
            "The currency of South Korea is the won.",
            "The currency of the United Kingdom is the pound sterling.",
        ),
    ),
    (
        "What gas do plants absorb for photosynthesis?",
        "In photosynthesis, plants absorb carbon dioxide and release oxygen.",
        (
            "Humans inhale oxygen and exhale carbon dioxide.",
            "Nitrogen makes up about 78 percent of the Earth's atmosphere.",
            "Helium is lighter than air and is used in balloons.",
        ),
    ),
    (
        "How many legs does a spider have?",
        "Spiders have eight legs.",
        (
            "Insects have six legs.",
            "A crab has ten legs, including its two claws.",
            "Centipedes have one pair of legs per body segment.",
        ),
    ),
    (
        "Who was the first President of the United States?",
        "George Washington was the first President of the United States.",
        (
            "John Adams was the second President of the United States.",
            "Thomas Jefferson was the third President of the United States.",
            "Abraham Lincoln was the sixteenth President of the United States.",
        ),
    ),
    (
        "What is the largest mammal?",
        "The blue whale is the largest mammal, and the largest animal known to have lived.",
        (
            "The African elephant is the largest land animal.",
            "The giraffe is the tallest land animal.",
            "The whale shark is the largest fish.",
        ),
    ),
)
