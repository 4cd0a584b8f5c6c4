"""Layer 7, site: presenting reports. Leaderboard submissions (`leaderboard`), the static
site and the paper tables (`render`, templates in reporters/), a study's findings pages
(`findings`). Nothing here computes science."""
