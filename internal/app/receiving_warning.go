package app

// ReceivingWarning is what a receiving address made through this process
// must be told when the process runs no inbound listener: without one
// anywhere in the deployment, mail for the address never arrives, and
// nothing else would say so (the address is made, its answer a 201). ""
// when the process listens.
func (s *Service) ReceivingWarning() string {
	if !s.cfg.NoInboundListener {
		return ""
	}
	return "this sendonce process runs no inbound listener (--inbound-addr): unless another process of this deployment does, mail for receiving addresses does not arrive (docs/receiving.md)"
}
