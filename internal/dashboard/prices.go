package dashboard

// price is a provider's published list price per 1,000 emails, as a range
// when it depends on the plan.
type price struct {
	Provider  string
	Low, High float64 // US dollars per 1,000 emails
	Note      string
}

// pricesAsOf is when the table below was read from the providers' pages.
const pricesAsOf = "September 2026"

// prices is the one table of list prices the overview multiplies the
// duplicates prevented by. Update it (and pricesAsOf) when they change.
var prices = []price{
	{"Amazon SES", 0.10, 0.10, "à la carte"},
	{"Resend", 0.90, 0.90, "over plan"},
	{"Mailgun", 1.10, 1.80, "depending on plan"},
	{"Postmark", 1.20, 1.80, "over plan"},
}

// costLine is one provider's price of n emails.
type costLine struct {
	price
	CostLow, CostHigh float64
}

func costs(n float64) []costLine {
	out := make([]costLine, 0, len(prices))
	for _, p := range prices {
		out = append(out, costLine{price: p, CostLow: n / 1000 * p.Low, CostHigh: n / 1000 * p.High})
	}
	return out
}
