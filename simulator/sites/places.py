"""Where the simulated local sites' venues are: cities, their state or region, neighbourhoods and
postcodes. One table for every location-aware site, so that a person's city or neighbourhood
means the same place on the competing sites.

The first eight cities are the ones ``booking.test`` has always used (its pages show the city
only); the other sites also place each venue in a neighbourhood with its postcode.
"""

from __future__ import annotations

import re
import unicodedata

# city -> (state or region, country, [(neighbourhood, postcode), ...])
CITIES: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "Lisbon": ("Lisbon District", "Portugal",
               [("Alfama", "1100-001"), ("Baixa", "1100-148"), ("Bel\u00e9m", "1400-206"),
                ("Pr\u00edncipe Real", "1250-096")]),
    "Oslo": ("Oslo", "Norway",
             [("Gr\u00fcnerl\u00f8kka", "0552"), ("Frogner", "0263"), ("Majorstuen", "0367"),
              ("Gamle Oslo", "0190")]),
    "Austin": ("Texas", "United States",
               [("Downtown", "78701"), ("East Austin", "78702"), ("South Congress", "78704"),
                ("Hyde Park", "78751")]),
    "Kyoto": ("Kyoto Prefecture", "Japan",
              [("Gion", "605-0074"), ("Arashiyama", "616-8385"), ("Nakagyo", "604-8005"),
               ("Fushimi", "612-8081")]),
    "Nairobi": ("Nairobi County", "Kenya",
                [("Westlands", "00800"), ("Kilimani", "00505"), ("Karen", "00502"), ("Gigiri", "00621")]),
    "Toronto": ("Ontario", "Canada",
                [("The Annex", "M5S 2E1"), ("Kensington Market", "M5T 2L6"), ("Leslieville", "M4M 1H5"),
                 ("Yorkville", "M5R 1B2")]),
    "Melbourne": ("Victoria", "Australia",
                  [("Fitzroy", "3065"), ("St Kilda", "3182"), ("Carlton", "3053"), ("Richmond", "3121")]),
    "Porto": ("Porto District", "Portugal",
              [("Ribeira", "4050-510"), ("Boavista", "4100-130"), ("Foz do Douro", "4150-171"),
               ("Bonfim", "4300-061")]),
    "Barcelona": ("Catalonia", "Spain",
                  [("Gr\u00e0cia", "08012"), ("El Born", "08003"), ("Eixample", "08009"),
                   ("Barceloneta", "08039")]),
    "Chicago": ("Illinois", "United States",
                [("Wicker Park", "60622"), ("Lincoln Park", "60614"), ("The Loop", "60603"),
                 ("Pilsen", "60608")]),
}


def state_of(city: str) -> str:
    """The state or region a city is in."""
    return CITIES[city][0]


def neighbourhoods(city: str) -> list[tuple[str, str]]:
    """The city's (neighbourhood, postcode) pairs, in a fixed order."""
    return list(CITIES[city][2])


def slug(text: str) -> str:
    """A URL path segment for a name: ASCII, lower case, words joined by hyphens (Bel\u00e9m -> belem)."""
    text = text.replace("\u00f8", "o").replace("\u00d8", "O")  # letters NFKD does not split
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
