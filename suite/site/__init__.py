"""Layer 7, site: presenting reports. Leaderboard submissions (`leaderboard`), the static
site and the paper tables (`render`, templates in reporters/). Nothing here computes science."""
